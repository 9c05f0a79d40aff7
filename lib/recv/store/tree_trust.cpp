// What a sender below full trust may store (RecvOptions::sender_trust; docs/guarantees.md,
// "What a pusher may store"): a pusher into `sluice serve` holds the upload token, not the
// server's root. Its owners are not taken (none), its attributes are filtered by namespace
// before the dry run or the metadata table sees them, and its set-id bits are dropped when the
// mode is set: otherwise a root serve would store a setuid-root binary, a file capability or a
// trusted.* attribute for anyone with the token. Everything dropped is warned about per kind.
#include <unistd.h>

#include <vector>

#include "core/wire/acl_ids.hpp"
#include "recv/store/tree_meta.hpp"

namespace sluice {

namespace {

// The reasons, naming the serve option that lifts each (the Receiver's only such user).
constexpr const char* kNoOwners =
    "stored as the receiver's own user and group: it does not take owners from this sender (sluice serve: "
    "--push-keep-owners)";
constexpr const char* kNoNamedAcls =
    "an ACL naming users or groups is not taken from this sender (sluice serve: --push-keep-owners)";
constexpr const char* kOnlyUserXattrs =
    "only user.* attributes and ACLs are taken from this sender (sluice serve: --push-keep-privileges)";
constexpr const char* kNoSetId =
    "set-uid and set-gid bits are not taken from this sender (sluice serve: --push-keep-privileges)";
constexpr const char* kNoFileSticky = "a sticky bit is set only on directories for this sender";

} // namespace

void TreeMeta::confine(const std::string& path, wire::EntryMeta& m) {
    if (trust_ == SenderTrust::full) return;
    using M = wire::EntryMeta;
    if (trust_ == SenderTrust::none) {
        // Said only where it makes a difference: a sender whose ids are ours already lost nothing.
        if ((m.flags & M::kHasOwner) && map_user(m.user, m.uid) != ::geteuid()) warnings_.add("owners", path, kNoOwners);
        if ((m.flags & M::kHasGroup) && map_group(m.group, m.gid) != ::getegid()) warnings_.add("groups", path, kNoOwners);
        m.flags &= static_cast<uint8_t>(~(M::kHasOwner | M::kHasGroup));
    }
    std::erase_if(m.xattrs, [&](const std::pair<std::string, std::string>& x) {
        const std::string& name = x.first;
        if (name.starts_with("user.")) return false;
        if (wire::is_acl_name(name)) {
            if (trust_ == SenderTrust::owners || !wire::acl_names_someone(x.second)) return false;
            warnings_.add("ACLs naming users or groups", path, kNoNamedAcls);
            return true;
        }
        warnings_.add(xattr_kind(name), path, kOnlyUserXattrs);
        return true;
    });
}

mode_t TreeMeta::mode_to_set(const wire::ManifestEntry& e, const Stored& m, bool owner_kept) const {
    if (trust_ != SenderTrust::full) return e.mode & (e.kind == wire::EntryKind::directory ? 01777 : 0777);
    const bool ids_kept = owner_kept && (m.flags & wire::EntryMeta::kHasOwner) && (m.flags & wire::EntryMeta::kHasGroup);
    return e.mode & (ids_kept ? 07777 : 01777);
}

void TreeMeta::warn_mode_bits(const wire::ManifestEntry& e, mode_t mode) {
    const mode_t lost = e.mode & 07000 & ~mode;
    if (lost & 06000)
        warnings_.add("set-id bits", e.path,
                      trust_ == SenderTrust::full ? "kept only where the owner and group are kept" : kNoSetId);
    if (lost & 01000) warnings_.add("sticky bits of files", e.path, kNoFileSticky);
}

} // namespace sluice
