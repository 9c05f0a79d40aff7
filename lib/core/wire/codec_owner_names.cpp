// OWNER_NAMES (docs/protocol.md, "Owner names"): the sender's user and group names, once per
// id. What one frame can check alone is checked here (kinds, lengths, NUL, the count against
// the frame); a name given twice for one id and the per-transfer bound need the receiver's
// table (recv/store/owner_map.cpp).
#include <string>

#include "core/wire/byte_io.hpp"
#include "core/wire/codec.hpp"
#include "core/wire/codec_detail.hpp"

namespace sluice::wire {

using detail::bad;

namespace {
constexpr size_t kNameHeadBytes = 8; // kind u8, name_len u8, reserved u16, id u32
constexpr uint8_t kUser = 0, kGroup = 1;
} // namespace

void encode_owner_names(Bytes& out, const std::vector<OwnerName>& names) {
    size_t at = detail::begin_frame(out, FrameType::owner_names);
    ByteWriter w(out);
    w.u32(static_cast<uint32_t>(names.size()));
    for (const OwnerName& n : names) {
        w.u8(n.group ? kGroup : kUser);
        w.u8(static_cast<uint8_t>(n.name.size()));
        w.u16(0);
        w.u32(n.id);
        w.bytes(n.name);
    }
    detail::end_frame(out, at);
}

std::vector<OwnerName> decode_owner_names(Span payload) {
    ByteReader r(payload, "OWNER_NAMES");
    const uint32_t n = r.u32();
    // Each name takes at least 9 bytes: a count the frame cannot hold is refused before
    // anything is reserved.
    if (n == 0 || n > r.remaining() / (kNameHeadBytes + 1))
        bad("OWNER_NAMES: " + std::to_string(n) + " names announced in a frame of " + std::to_string(payload.size()) + " bytes");
    std::vector<OwnerName> names(n);
    for (OwnerName& o : names) {
        const uint8_t kind = r.u8();
        const size_t len = r.u8();
        const uint16_t reserved = r.u16();
        o.id = r.u32();
        if (kind != kUser && kind != kGroup) bad("OWNER_NAMES: unknown kind " + std::to_string(kind) + " for id " + std::to_string(o.id));
        if (reserved != 0) bad("OWNER_NAMES: reserved bits set");
        if (len == 0) bad("OWNER_NAMES: an empty name for id " + std::to_string(o.id));
        o.group = kind == kGroup;
        o.name = r.string(len);
        if (o.name.find('\0') != std::string::npos)
            bad("OWNER_NAMES: the name of " + std::string(o.group ? "group" : "user") + " id " + std::to_string(o.id) + " has a NUL byte");
    }
    r.expect_end();
    return names;
}

} // namespace sluice::wire
