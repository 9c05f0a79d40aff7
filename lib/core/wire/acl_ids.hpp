#pragma once
// The user and group ids inside a POSIX ACL as it travels (the kernel's posix_acl_xattr format,
// docs/protocol.md "Tree metadata"): u32 version 2, then 8-byte little-endian entries (u16 tag,
// u16 perm, u32 id). Named-user (ACL_USER) and named-group (ACL_GROUP) entries carry an id that
// is mapped by name like a file's owner (issue 17): the sender names those ids in OWNER_NAMES,
// the receiver rewrites them (recv/store/tree_meta.cpp) before comparing or setting the ACL.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace sluice::wire {

inline constexpr std::string_view kAclAccessName = "system.posix_acl_access";
inline constexpr std::string_view kAclDefaultName = "system.posix_acl_default";

inline bool is_acl_name(std::string_view name) { return name == kAclAccessName || name == kAclDefaultName; }

// Calls fn(group, id) for each named-user (group false) and named-group (group true) entry of
// an ACL value; fn returns the id to store there. A value that is not whole entries is left as
// it is (the decoder refused such a value from the network; a local one comes from the kernel).
void map_acl_ids(std::string& value, const std::function<uint32_t(bool group, uint32_t id)>& fn);

// Whether an ACL value has a named-user or named-group entry (grants someone beyond the owner,
// the owning group and others); a value that is not whole entries counts as one that does.
bool acl_names_someone(const std::string& value);

// After mapping: the entries in the kernel's order (by tag, then id) as getxattr returns them,
// so a dry run compares bytes; two entries that mapped to the same id become one with both
// entries' permissions (what either sender id was allowed). Returns how many were merged.
size_t normalize_acl(std::string& value);

} // namespace sluice::wire
