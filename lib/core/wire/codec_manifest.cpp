// MANIFEST and its answers (MANIFEST_ACK, MANIFEST_END), and the check every path from the
// network goes through: the frames whose decoding carries most of the protocol's limits.
#include "core/wire/codec.hpp"

#include <string>
#include <string_view>

#include "core/wire/byte_io.hpp"
#include "core/wire/codec_detail.hpp"
#include "core/wire/codec_sparse.hpp"

namespace sluice::wire {

using detail::bad;
using detail::begin_frame;
using detail::end_frame;

void validate_relative_path(const std::string& path) {
    auto fail = [&](const char* why) { bad("path '" + path + "' refused: " + why); };
    if (path.empty()) fail("empty");
    if (path.size() > kMaxPathBytes) fail("longer than 4095 bytes");
    if (path.find('\0') != std::string::npos) fail("contains a NUL byte");
    if (path.front() == '/') fail("absolute");
    size_t start = 0;
    while (start <= path.size()) {
        size_t end = path.find('/', start);
        if (end == std::string::npos) end = path.size();
        std::string_view comp(path.data() + start, end - start);
        if (comp.empty()) fail("has an empty component");
        if (comp == ".") fail("has a '.' component");
        if (comp == "..") fail("has a '..' component");
        if (comp.size() > kMaxNameBytes) fail("has a component longer than 255 bytes");
        start = end + 1;
    }
}

void encode_manifest(Bytes& out, const ManifestPage& c) {
    size_t at = begin_frame(out, FrameType::manifest);
    ByteWriter w(out);
    w.u32(c.seq);
    w.u32(static_cast<uint32_t>(c.entries.size()));
    size_t next_meta = 0;
    for (size_t i = 0; i < c.entries.size(); ++i) {
        const auto& e = c.entries[i];
        const bool has_meta = next_meta < c.meta.size() && c.meta[next_meta].first == i;
        w.u64(e.file_id);
        w.u64(e.size);
        w.i64(e.mtime_ns);
        w.u32(e.mode);
        w.u8(static_cast<uint8_t>(e.kind));
        w.u8(static_cast<uint8_t>((has_meta ? kEntryHasMeta : 0) | (e.sparse ? kEntrySparse : 0)));
        w.u16(static_cast<uint16_t>(e.path.size()));
        w.u16(static_cast<uint16_t>(e.link_target.size()));
        w.u16(0);
        w.bytes(e.path);
        w.bytes(e.link_target);
        if (has_meta) encode_entry_meta(out, c.meta[next_meta++].second);
        if (e.sparse) encode_extents(w, e);
    }
    // Metadata naming no entry of the page (or out of order) would be dropped without a word.
    if (next_meta != c.meta.size()) throw Error(ErrorCode::internal, "a manifest page's metadata names no entry of the page");
    end_frame(out, at);
}

ManifestPage decode_manifest(Span payload) {
    ByteReader r(payload, "MANIFEST");
    ManifestPage c;
    c.seq = r.u32();
    uint32_t count = r.u32();
    if (count > kMaxEntriesPerPage) bad("MANIFEST: " + std::to_string(count) + " entries exceed the limit per page");
    if (count > r.remaining() / 36) bad("MANIFEST: entry count " + std::to_string(count) + " larger than the frame");
    c.entries.reserve(count);
    for (uint32_t i = 0; i < count; ++i) {
        ManifestEntry e;
        e.file_id = r.u64();
        e.size = r.u64();
        e.mtime_ns = r.i64();
        e.mode = r.u32();
        uint8_t kind = r.u8();
        const uint8_t flags = r.u8();
        uint16_t path_len = r.u16();
        uint16_t target_len = r.u16();
        r.u16();
        if (kind < 1 || kind > 9)
            bad("MANIFEST: entry " + std::to_string(e.file_id) + " has unknown kind " + std::to_string(kind));
        e.kind = static_cast<EntryKind>(kind);
        if (path_len > kMaxPathBytes) bad("MANIFEST: entry " + std::to_string(e.file_id) + " path too long");
        if (target_len > kMaxLinkTargetBytes) bad("MANIFEST: entry " + std::to_string(e.file_id) + " link target too long");
        e.path = r.string(path_len);
        e.link_target = r.string(target_len);
        validate_relative_path(e.path);
        if (flags & ~(kEntryHasMeta | kEntrySparse)) bad("MANIFEST: '" + e.path + "' has unknown flags " + std::to_string(flags));
        if (flags & kEntryHasMeta) c.meta.emplace_back(i, decode_entry_meta(r, e.path));
        check_tree_entry(e, (flags & kEntryHasMeta) ? &c.meta.back().second : nullptr);
        if (flags & kEntrySparse) decode_extents(r, e);
        if (e.mode & ~07777u) bad("MANIFEST: '" + e.path + "' has mode bits outside 07777");
        if (e.kind != EntryKind::file && e.size != 0) bad("MANIFEST: '" + e.path + "' is not a file but has a size");
        if (e.kind == EntryKind::pipe && count != 1) bad("MANIFEST: pipe '" + e.path + "' must be the only entry of its page");
        if (e.size > kMaxFileSize) bad("MANIFEST: '" + e.path + "' size " + std::to_string(e.size) + " exceeds 1 PiB");
        if (e.kind == EntryKind::symlink || e.kind == EntryKind::hard_link) {
            if (e.link_target.empty() || e.link_target.find('\0') != std::string::npos)
                bad("MANIFEST: link '" + e.path + "' has an empty or NUL-bearing target");
        } else if (!e.link_target.empty()) {
            bad("MANIFEST: '" + e.path + "' is not a symlink but has a link target");
        }
        c.entries.push_back(std::move(e));
    }
    r.expect_end();
    return c;
}

void encode_manifest_ack(Bytes& out, const ManifestAck& a) {
    size_t at = begin_frame(out, FrameType::manifest_ack);
    ByteWriter w(out);
    w.u32(a.seq);
    w.u32(static_cast<uint32_t>(a.verified.size()));
    for (const auto& v : a.verified) {
        w.u64(v.file_id);
        w.u64(v.offset);
        w.u64(v.length);
    }
    end_frame(out, at);
}

ManifestAck decode_manifest_ack(Span payload) {
    ByteReader r(payload, "MANIFEST_ACK");
    ManifestAck a;
    a.seq = r.u32();
    uint32_t n = r.u32();
    if (n > r.remaining() / 24) bad("MANIFEST_ACK: range count " + std::to_string(n) + " larger than the frame");
    a.verified.resize(n);
    for (auto& v : a.verified) {
        v.file_id = r.u64();
        v.offset = r.u64();
        v.length = r.u64();
    }
    r.expect_end();
    return a;
}

void encode_manifest_end(Bytes& out, const ManifestEnd& e) {
    size_t at = begin_frame(out, FrameType::manifest_end);
    ByteWriter w(out);
    w.u32(e.page_count);
    w.u32(0);
    w.u64(e.file_count);
    w.u64(e.total_bytes);
    end_frame(out, at);
}

ManifestEnd decode_manifest_end(Span payload) {
    ByteReader r(payload, "MANIFEST_END");
    ManifestEnd e;
    e.page_count = r.u32();
    r.u32();
    e.file_count = r.u64();
    e.total_bytes = r.u64();
    r.expect_end();
    return e;
}

} // namespace sluice::wire
