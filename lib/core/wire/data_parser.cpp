#include "core/wire/data_parser.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "sluice/error.hpp"
#include "core/wire/codec.hpp"

namespace sluice::wire {

size_t DataFrameReader::on_header(std::span<const unsigned char> header) {
    if (ended_) data_after_end();
    // Bounds of every type (BLOCK at most kMaxBlockData, at least its prefix) and unknown types.
    const FrameHeader h = decode_frame_header(header);
    type_ = h.type;
    switch (static_cast<FrameType>(h.type)) {
    case FrameType::block:
        // An empty block would be a no-op on the wire that every path would have to special-case
        // (a zero-length read means "peer closed"; a zero-length write is no progress).
        if (h.length == kBlockPrefixBytes) throw Error(ErrorCode::protocol, "BLOCK frame without data on " + label_);
        data_length_ = h.length - kBlockPrefixBytes;
        return kBlockPrefixBytes;
    case FrameType::stream_end:
        if (h.length != kStreamEndBytes)
            throw Error(ErrorCode::protocol, "STREAM_END frame of " + std::to_string(h.length) + " bytes on " + label_ +
                                                 " (it carries " + std::to_string(kStreamEndBytes) + ")");
        return kStreamEndBytes;
    default:
        throw Error(ErrorCode::protocol,
                    std::string(frame_type_name(h.type)) + " frame is not allowed on a data stream (" + label_ + ")");
    }
}

std::optional<BlockHeader> DataFrameReader::on_part(std::span<const unsigned char> part) {
    if (static_cast<FrameType>(type_) == FrameType::block) {
        BlockHeader b{decode_block_prefix(part), data_length_};
        ++counts_.blocks;
        counts_.bytes += b.data_length;
        return b;
    }
    const StreamEnd e = decode_stream_end(part);
    if (e.blocks != counts_.blocks || e.bytes != counts_.bytes)
        throw Error(ErrorCode::protocol, label_ + " ended announcing " + std::to_string(e.blocks) + " blocks / " +
                                             std::to_string(e.bytes) + " bytes, but carried " + std::to_string(counts_.blocks) +
                                             " / " + std::to_string(counts_.bytes));
    ended_ = true;
    return std::nullopt;
}

void DataFrameReader::data_after_end() const { throw Error(ErrorCode::protocol, "data after STREAM_END on " + label_); }

void refuse_data_after_end(const DataFrameReader& reader, int sock) {
    unsigned char b;
    ssize_t r;
    do {
        r = ::recv(sock, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    } while (r < 0 && errno == EINTR);
    if (r > 0) reader.data_after_end();
}

bool DataFrameParser::stage(std::span<const unsigned char>& in, size_t want) {
    size_t take = std::min(want - staged_, in.size());
    std::memcpy(stage_ + staged_, in.data(), take);
    staged_ += take;
    in = in.subspan(take);
    return staged_ == want;
}

void DataFrameParser::feed(std::span<const unsigned char> in, DataFrameHandler& h) {
    while (!in.empty()) {
        if (reader_.ended()) reader_.data_after_end();
        switch (state_) {
        case State::header:
            if (!stage(in, kFrameHeaderBytes)) return;
            staged_ = 0;
            part_ = reader_.on_header(std::span<const unsigned char>(stage_, kFrameHeaderBytes));
            state_ = State::part;
            break;
        case State::part: {
            if (!stage(in, part_)) return;
            staged_ = 0;
            std::optional<BlockHeader> b = reader_.on_part(std::span<const unsigned char>(stage_, part_));
            if (!b) {
                state_ = State::header;
                h.stream_end(reader_.counts());
                break;
            }
            data_left_ = b->data_length;
            state_ = State::data;
            h.block_begin(b->prefix, b->data_length);
            break;
        }
        case State::data: {
            size_t take = static_cast<size_t>(std::min<uint64_t>(data_left_, in.size()));
            h.block_data(in.first(take));
            in = in.subspan(take);
            data_left_ -= take;
            if (data_left_ == 0) {
                h.block_end();
                state_ = State::header;
            }
            break;
        }
        }
    }
}

} // namespace sluice::wire
