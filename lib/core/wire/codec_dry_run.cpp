// --dry-run (docs/protocol.md, "Dry run"): DRY_RUN_ITEMS and DRY_RUN_DELETED, the receiver's
// answers. What decoding can check alone is checked here (counts against the frame, known
// bits, path lengths, ids in order within a frame); what needs the manifest (ids sent, order
// across frames, the total) is checked by the sender (send/session/dry_run_list.cpp).
#include <string>

#include "core/wire/byte_io.hpp"
#include "core/wire/codec.hpp"
#include "core/wire/codec_detail.hpp"

namespace sluice::wire {

using detail::bad;
using detail::begin_frame;
using detail::end_frame;

namespace {
constexpr size_t kItemBytes = 12; // file_id u64, changes u16, reserved u16
constexpr uint8_t kDeletedDir = 1;
} // namespace

void encode_dry_run_items(Bytes& out, const std::vector<DryRunItem>& items) {
    size_t at = begin_frame(out, FrameType::dry_run_items);
    ByteWriter w(out);
    w.u32(static_cast<uint32_t>(items.size()));
    for (const DryRunItem& i : items) {
        w.u64(i.file_id);
        w.u16(i.changes);
        w.u16(0);
    }
    end_frame(out, at);
}

std::vector<DryRunItem> decode_dry_run_items(Span payload) {
    ByteReader r(payload, "DRY_RUN_ITEMS");
    const uint32_t n = r.u32();
    if (n == 0 || n != r.remaining() / kItemBytes || r.remaining() % kItemBytes)
        bad("DRY_RUN_ITEMS: " + std::to_string(n) + " items announced, the frame holds " +
            std::to_string(r.remaining() / kItemBytes));
    std::vector<DryRunItem> items(n);
    for (size_t i = 0; i < n; ++i) {
        DryRunItem& it = items[i];
        it.file_id = r.u64();
        it.changes = r.u16();
        if (r.u16() != 0) bad("DRY_RUN_ITEMS: reserved bits set");
        if (it.changes == 0 || (it.changes & ~DryRunItem::kAll))
            bad("DRY_RUN_ITEMS: file id " + std::to_string(it.file_id) + " has change bits " + std::to_string(it.changes) +
                " (none, or unknown ones)");
        if (i > 0 && it.file_id <= items[i - 1].file_id)
            bad("DRY_RUN_ITEMS: file id " + std::to_string(it.file_id) + " is not after " + std::to_string(items[i - 1].file_id));
    }
    r.expect_end();
    return items;
}

void encode_dry_run_deleted(Bytes& out, const DryRunDeleted& d) {
    size_t at = begin_frame(out, FrameType::dry_run_deleted);
    ByteWriter w(out);
    w.u32(static_cast<uint32_t>(d.paths.size()));
    for (const DryRunDeleted::Path& p : d.paths) {
        w.u8(p.is_dir ? kDeletedDir : 0);
        w.u16(static_cast<uint16_t>(p.path.size()));
        w.bytes(p.path);
    }
    end_frame(out, at);
}

DryRunDeleted decode_dry_run_deleted(Span payload) {
    ByteReader r(payload, "DRY_RUN_DELETED");
    const uint32_t n = r.u32();
    // Each path takes at least 4 bytes (flags, length, one byte): a count the frame cannot
    // hold is refused before anything is reserved.
    if (n == 0 || n > r.remaining() / 4) bad("DRY_RUN_DELETED: " + std::to_string(n) + " paths announced in a frame of " +
                                             std::to_string(payload.size()) + " bytes");
    DryRunDeleted d;
    d.paths.reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
        const uint8_t flags = r.u8();
        if (flags & ~kDeletedDir) bad("DRY_RUN_DELETED: unknown flags " + std::to_string(flags));
        const size_t len = r.u16();
        if (len == 0 || len > kMaxPathBytes) bad("DRY_RUN_DELETED: a path of " + std::to_string(len) + " bytes");
        DryRunDeleted::Path p{.path = r.string(len), .is_dir = (flags & kDeletedDir) != 0};
        if (p.path.find('\0') != std::string::npos) bad("DRY_RUN_DELETED: a path with a NUL byte");
        d.paths.push_back(std::move(p));
    }
    r.expect_end();
    return d;
}

} // namespace sluice::wire
