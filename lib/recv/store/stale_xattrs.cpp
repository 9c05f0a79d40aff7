#include "recv/store/stale_xattrs.hpp"

#include <sys/xattr.h>

#include <algorithm>
#include <cerrno>

#include "core/io/xattr_list.hpp"
#include "core/wire/protocol.hpp"

namespace sluice {

bool StaleXattrs::covered(std::string_view name) const {
    using T = wire::TreeOptionsFrame;
    if (name == "system.posix_acl_access" || name == "system.posix_acl_default") return exact_ & T::kExactAcls;
    if (name.starts_with("user.")) return exact_ & T::kExactXattrs;
    if (user_only_) return false;
    if (name == "security.capability") return exact_ & T::kExactXattrs;
    if (name.starts_with("trusted.")) return exact_ & T::kExactTrusted;
    return false;
}

bool StaleXattrs::find(int dir, const char* name, const std::string& path, bool follow,
                       const std::vector<std::pair<std::string, std::string>>& sent, std::vector<std::string>& stale) {
    stale.clear();
    if (!exact_) return true;
    if (names_.empty()) names_.resize(4096);
    const auto list = [&](char* b, size_t size) {
        if (dir >= 0) return list_xattr_names(dir, name, path.c_str(), b, size);
        return follow ? ::listxattr(path.c_str(), b, size) : ::llistxattr(path.c_str(), b, size);
    };
    ssize_t n;
    // A concurrent change may grow the list between the size query and the read: ask again.
    while ((n = list(names_.data(), names_.size())) < 0 && errno == ERANGE) {
        const ssize_t need = list(nullptr, 0);
        if (need < 0) return errno == ENOTSUP;
        names_.resize(std::max<size_t>(static_cast<size_t>(need), names_.size() * 2));
    }
    if (n < 0) return errno == ENOTSUP;
    for (size_t at = 0; at < static_cast<size_t>(n);) {
        const std::string_view listed(names_.data() + at);
        at += listed.size() + 1;
        if (listed.empty() || !covered(listed)) continue;
        if (std::none_of(sent.begin(), sent.end(), [&](const auto& kv) { return kv.first == listed; }))
            stale.emplace_back(listed);
    }
    return true;
}

} // namespace sluice
