#include "core/wire/link_target.hpp"

#include "sluice/error.hpp"
#include "sluice/printable.hpp"

namespace sluice::wire {

bool link_stays_inside(std::string_view link_path, std::string_view target) {
    if (target.empty() || target.front() == '/' || target.find('\0') != std::string_view::npos) return false;
    // The link's own directory: one level per '/' in its path.
    long depth = 0;
    bool descended = false;
    for (char c : link_path)
        if (c == '/') ++depth;
    while (!target.empty()) {
        size_t slash = target.find('/');
        std::string_view part = target.substr(0, slash);
        target = slash == std::string_view::npos ? std::string_view{} : target.substr(slash + 1);
        if (part.empty() || part == ".") continue;
        if (part == "..") {
            // '..' after a name could climb out of whatever that name is a link to ("a -> ."
            // then "a/../x"): only leading '..' climb real directories, which the count covers.
            if (descended || --depth < 0) return false;
        } else {
            descended = true;
            ++depth;
        }
    }
    return true;
}

void check_confined_entry(const ManifestEntry& e) {
    if (e.kind == EntryKind::symlink && !link_stays_inside(e.path, e.link_target))
        throw Error(ErrorCode::protocol, "the sender sent the symlink '" + printable(e.path) + "' -> '" +
                                             printable(e.link_target) +
                                             "', which leads out of the destination (absolute, or '..' above it); refused");
    if (static_cast<uint8_t>(e.kind) >= static_cast<uint8_t>(EntryKind::hard_link))
        throw Error(ErrorCode::protocol, "the sender sent '" + printable(e.path) +
                                             "' as a hard link or special file, which a get does not take; refused");
}

} // namespace sluice::wire
