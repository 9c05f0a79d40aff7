// The tree-metadata trailer of a manifest entry (flag kEntryHasMeta) and the rules of entry
// kinds 5-9 (docs/protocol.md, "Tree metadata"). Everything here comes from the network: every
// length and count is bounded before anything is allocated, and POSIX ACLs are parsed, not
// passed through, so the receiver never hands the kernel an entry it has not checked.
#include <string>
#include <string_view>

#include "core/wire/byte_io.hpp"
#include "core/wire/codec.hpp"
#include "core/wire/codec_detail.hpp"

namespace sluice::wire {

using detail::bad;

namespace {

// Linux's own limits (XATTR_NAME_MAX, XATTR_SIZE_MAX); the count and the per-entry total bound
// what one entry may make the receiver hold (a page is bounded by kMaxControlPayload anyway).
constexpr size_t kMaxOwnerNameBytes = 255;
constexpr size_t kMaxXattrNameBytes = 255;
constexpr size_t kMaxXattrValueBytes = 65536;
constexpr size_t kMaxXattrsPerEntry = 128;
constexpr size_t kMaxXattrBytesPerEntry = 256 * 1024;
constexpr size_t kMaxAclEntries = 1024;

constexpr std::string_view kAclAccess = "system.posix_acl_access";
constexpr std::string_view kAclDefault = "system.posix_acl_default";

bool known_namespace(std::string_view n) {
    return n.starts_with("user.") || n.starts_with("trusted.") || n.starts_with("security.") || n == kAclAccess ||
           n == kAclDefault;
}

// The kernel's posix_acl_xattr format: u32 version 2, then 8-byte entries (u16 tag, u16 perm,
// u32 id). Tags: USER_OBJ 1, USER 2, GROUP_OBJ 4, GROUP 8, MASK 0x10, OTHER 0x20.
void check_acl(std::string_view value, const std::string& path, std::string_view name) {
    auto fail = [&](const std::string& why) { bad("MANIFEST: '" + path + "' " + std::string(name) + ": " + why); };
    if (value.size() < 4 || (value.size() - 4) % 8 != 0) fail("not a POSIX ACL (" + std::to_string(value.size()) + " bytes)");
    const size_t n = (value.size() - 4) / 8;
    if (n > kMaxAclEntries) fail(std::to_string(n) + " ACL entries exceed the limit of " + std::to_string(kMaxAclEntries));
    ByteReader r(std::span(reinterpret_cast<const unsigned char*>(value.data()), value.size()), "ACL");
    if (r.u32() != 2) fail("unknown ACL version");
    for (size_t i = 0; i < n; ++i) {
        const uint16_t tag = r.u16(), perm = r.u16();
        r.u32();
        if (tag != 1 && tag != 2 && tag != 4 && tag != 8 && tag != 0x10 && tag != 0x20)
            fail("ACL entry with unknown tag " + std::to_string(tag));
        if (perm & ~7u) fail("ACL entry with permission bits outside rwx");
    }
}

} // namespace

void encode_entry_meta(std::vector<unsigned char>& out, const EntryMeta& m) {
    ByteWriter w(out);
    w.u32(m.uid);
    w.u32(m.gid);
    w.u64(m.rdev);
    w.u8(m.flags);
    w.u8(static_cast<uint8_t>(m.user.size()));
    w.u8(static_cast<uint8_t>(m.group.size()));
    w.u8(0);
    w.u16(static_cast<uint16_t>(m.xattrs.size()));
    w.bytes(m.user);
    w.bytes(m.group);
    for (const auto& [name, value] : m.xattrs) {
        w.u16(static_cast<uint16_t>(name.size()));
        w.u32(static_cast<uint32_t>(value.size()));
        w.bytes(name);
        w.bytes(value);
    }
}

EntryMeta decode_entry_meta(ByteReader& r, const std::string& path) {
    EntryMeta m;
    m.uid = r.u32();
    m.gid = r.u32();
    m.rdev = r.u64();
    m.flags = r.u8();
    const size_t user_len = r.u8(), group_len = r.u8();
    r.u8();
    const size_t count = r.u16();
    if (m.flags & ~(EntryMeta::kHasOwner | EntryMeta::kHasGroup))
        bad("MANIFEST: '" + path + "' has unknown metadata flags " + std::to_string(m.flags));
    if (count > kMaxXattrsPerEntry)
        bad("MANIFEST: '" + path + "' has " + std::to_string(count) + " extended attributes, more than the limit of " +
            std::to_string(kMaxXattrsPerEntry));
    m.user = r.string(user_len);
    m.group = r.string(group_len);
    if (m.user.find('\0') != std::string::npos || m.group.find('\0') != std::string::npos)
        bad("MANIFEST: '" + path + "' has an owner name with a NUL byte");
    static_assert(kMaxOwnerNameBytes >= 255); // u8 lengths: bounded by the encoding
    size_t total = 0;
    m.xattrs.reserve(count);
    for (size_t i = 0; i < count; ++i) {
        const size_t name_len = r.u16(), value_len = r.u32();
        if (name_len == 0 || name_len > kMaxXattrNameBytes)
            bad("MANIFEST: '" + path + "' has an extended attribute name of " + std::to_string(name_len) + " bytes (1-255)");
        if (value_len > kMaxXattrValueBytes)
            bad("MANIFEST: '" + path + "' has an extended attribute value of " + std::to_string(value_len) +
                " bytes, more than 65536");
        total += name_len + value_len;
        if (total > kMaxXattrBytesPerEntry)
            bad("MANIFEST: '" + path + "' has more than 256 KiB of extended attributes");
        std::string name = r.string(name_len);
        std::string value = r.string(value_len);
        if (name.find('\0') != std::string::npos) bad("MANIFEST: '" + path + "' has an attribute name with a NUL byte");
        if (!known_namespace(name))
            bad("MANIFEST: '" + path + "' has attribute '" + name +
                "' outside the user., trusted., security. namespaces and POSIX ACLs");
        if (name == kAclAccess || name == kAclDefault) check_acl(value, path, name);
        for (const auto& x : m.xattrs)
            if (x.first == name) bad("MANIFEST: '" + path + "' lists attribute '" + name + "' twice");
        m.xattrs.emplace_back(std::move(name), std::move(value));
    }
    return m;
}

void check_tree_entry(const ManifestEntry& e, const EntryMeta* meta) {
    switch (e.kind) {
    case EntryKind::hard_link:
        if (!meta) bad("MANIFEST: hard link '" + e.path + "' lacks its metadata (the target's file id)");
        if (meta->rdev >= e.file_id)
            bad("MANIFEST: hard link '" + e.path + "' names entry " + std::to_string(meta->rdev) +
                ", which is not an earlier entry of the transfer");
        validate_relative_path(e.link_target);
        if (!meta->xattrs.empty()) bad("MANIFEST: hard link '" + e.path + "' carries attributes (its target has them)");
        break;
    case EntryKind::char_device:
    case EntryKind::block_device:
        if (!meta) bad("MANIFEST: device '" + e.path + "' lacks its metadata (the device number)");
        break;
    case EntryKind::pipe:
        if (meta) bad("MANIFEST: pipe '" + e.path + "' carries tree metadata");
        break;
    default:
        if (meta && meta->rdev != 0) bad("MANIFEST: '" + e.path + "' is not a device but has a device number");
        break;
    }
}

void encode_tree_options(Bytes& out, const TreeOptionsFrame& t) {
    size_t at = detail::begin_frame(out, FrameType::tree_options);
    ByteWriter w(out);
    w.u32(t.flags);
    w.u32(static_cast<uint32_t>(t.rules.size()));
    for (const std::string& r : t.rules) {
        w.u16(static_cast<uint16_t>(r.size()));
        w.bytes(r);
    }
    if (t.flags & TreeOptionsFrame::kOwnerMaps)
        for (const std::string* m : {&t.usermap, &t.groupmap}) {
            w.u16(static_cast<uint16_t>(m->size()));
            w.bytes(*m);
        }
    detail::end_frame(out, at);
}

TreeOptionsFrame decode_tree_options(Span payload) {
    constexpr uint32_t kMaxRules = 4096;
    ByteReader r(payload, "TREE_OPTIONS");
    TreeOptionsFrame t;
    t.flags = r.u32();
    if (t.flags & ~(TreeOptionsFrame::kDelete | TreeOptionsFrame::kDryRun | TreeOptionsFrame::kOwnerMaps |
                    TreeOptionsFrame::kUserChown | TreeOptionsFrame::kGroupChown | TreeOptionsFrame::kExactMask))
        bad("TREE_OPTIONS: unknown flags " + std::to_string(t.flags));
    if ((t.flags & (TreeOptionsFrame::kUserChown | TreeOptionsFrame::kGroupChown)) && !(t.flags & TreeOptionsFrame::kOwnerMaps))
        bad("TREE_OPTIONS: --chown flags without owner maps");
    const uint32_t n = r.u32();
    if (n > kMaxRules) bad("TREE_OPTIONS: " + std::to_string(n) + " filter rules exceed the limit of 4096");
    for (uint32_t i = 0; i < n; ++i) {
        const size_t len = r.u16();
        if (len < 3 || len > kMaxPathBytes + 2) bad("TREE_OPTIONS: a filter rule of " + std::to_string(len) + " bytes");
        std::string rule = r.string(len);
        if ((rule[0] != '+' && rule[0] != '-') || rule[1] != ' ' || rule.find('\0') != std::string::npos)
            bad("TREE_OPTIONS: filter rule '" + rule + "' is not '+ PATTERN' or '- PATTERN'");
        t.rules.push_back(std::move(rule));
    }
    if (t.flags & TreeOptionsFrame::kOwnerMaps)
        for (std::string* m : {&t.usermap, &t.groupmap}) {
            const size_t len = r.u16();
            if (len > kMaxPathBytes) bad("TREE_OPTIONS: an owner map of " + std::to_string(len) + " bytes (at most 4095)");
            *m = r.string(len);
            if (m->find('\0') != std::string::npos) bad("TREE_OPTIONS: an owner map with a NUL byte");
        }
    r.expect_end();
    return t;
}

} // namespace sluice::wire
