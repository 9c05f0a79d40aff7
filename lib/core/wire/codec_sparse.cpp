// The data extents of a sparse file in its manifest entry (codec_sparse.hpp). Everything in
// them comes from the network: the count is bounded before anything is allocated, and every
// extent must lie inside the file, after the one before it, so the receiver can mark the
// holes between them as already complete without a search or a second check.
#include "core/wire/codec_sparse.hpp"

#include <string>

#include "core/wire/codec_detail.hpp"

namespace sluice::wire {

using detail::bad;

void encode_extents(ByteWriter& w, const ManifestEntry& e) {
    w.u32(static_cast<uint32_t>(e.data_extents.size()));
    for (const Extent& x : e.data_extents) {
        w.u64(x.offset);
        w.u64(x.length);
    }
}

void decode_extents(ByteReader& r, ManifestEntry& e) {
    const std::string who = "MANIFEST: sparse file '" + e.path + "'";
    if (e.kind != EntryKind::file) bad("MANIFEST: '" + e.path + "' has the sparse flag but is not a regular file");
    uint32_t count = r.u32();
    if (count > kMaxExtentsPerFile)
        bad(who + " lists " + std::to_string(count) + " data extents, more than the limit of " +
            std::to_string(kMaxExtentsPerFile));
    if (count > r.remaining() / 16) bad(who + ": extent count " + std::to_string(count) + " larger than the frame");
    e.sparse = true;
    e.data_extents.resize(count);
    uint64_t end = 0;
    for (uint32_t i = 0; i < count; ++i) {
        Extent& x = e.data_extents[i];
        x.offset = r.u64();
        x.length = r.u64();
        const std::string at = " extent " + std::to_string(i) + " [" + std::to_string(x.offset) + ", +" +
                               std::to_string(x.length) + ")";
        if (x.length == 0) bad(who + at + " is empty");
        if (x.offset < end) bad(who + at + " overlaps or precedes the extent before it");
        if (x.offset > e.size || x.length > e.size - x.offset)
            bad(who + at + " lies outside its size of " + std::to_string(e.size) + " bytes");
        end = x.offset + x.length;
    }
}

} // namespace sluice::wire
