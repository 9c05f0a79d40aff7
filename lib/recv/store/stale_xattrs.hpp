#pragma once
// Attributes an entry the receiver keeps in place has and the sender's list lacks (issue 17,
// docs/protocol.md "Exact attributes"): what `setfattr -x` / `setfacl -b` on the source must
// remove here, as rsync -AX does. Only in the namespaces TREE_OPTIONS says the sender's lists
// are complete for (wire::TreeOptionsFrame::kExact*); never security.selinux or any other
// namespace sluice does not carry, which belong to the receiver's host.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice {

class StaleXattrs {
public:
    // exact: TREE_OPTIONS' kExact* flags (0: remove nothing, list nothing). user_only: a
    // sender below full trust (RecvOptions::sender_trust) may remove only what it may set,
    // user.* attributes and ACLs: never trusted.* or security.capability.
    void set_exact(uint32_t exact, bool user_only = false) {
        exact_ = exact;
        user_only_ = user_only;
    }
    bool on() const { return exact_ != 0; }
    // Whether `name` is in a namespace whose list the sender said is complete.
    bool covered(std::string_view name) const;
    // The covered names an entry has that `sent` lacks: listed as `name` in `dir` (listxattrat,
    // not following a symlink; dir -1: by `path`, listxattr if follow, else llistxattr).
    // A file system without attributes (ENOTSUP) has none. Returns false with errno set when
    // the list cannot be read.
    bool find(int dir, const char* name, const std::string& path, bool follow,
              const std::vector<std::pair<std::string, std::string>>& sent, std::vector<std::string>& stale);

private:
    uint32_t exact_ = 0;
    bool user_only_ = false;
    std::vector<char> names_; // llistxattr's buffer, reused: one per transfer, not per entry
};

} // namespace sluice
