#include "core/wire/data_parser.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "sluice/error.hpp"
#include "core/wire/codec.hpp"

namespace sluice::wire {

bool DataFrameParser::stage(std::span<const unsigned char>& in, size_t want) {
    size_t take = std::min(want - staged_, in.size());
    std::memcpy(stage_ + staged_, in.data(), take);
    staged_ += take;
    in = in.subspan(take);
    return staged_ == want;
}

void DataFrameParser::feed(std::span<const unsigned char> in, DataFrameHandler& h) {
    while (!in.empty()) {
        switch (state_) {
        case State::header:
            if (!stage(in, kFrameHeaderBytes)) return;
            header_ = decode_frame_header(std::span<const unsigned char>(stage_, kFrameHeaderBytes));
            staged_ = 0;
            if (header_.type == static_cast<uint8_t>(FrameType::block)) {
                state_ = State::prefix;
            } else if (header_.type == static_cast<uint8_t>(FrameType::stream_end)) {
                if (header_.length != 16) throw Error(ErrorCode::protocol, "STREAM_END frame with length " + std::to_string(header_.length));
                state_ = State::stream_end_payload;
            } else {
                throw Error(ErrorCode::protocol, std::string(frame_type_name(header_.type)) + " frame is not allowed on a data stream");
            }
            break;
        case State::prefix: {
            if (!stage(in, kBlockPrefixBytes)) return;
            BlockPrefix p = decode_block_prefix(std::span<const unsigned char>(stage_, kBlockPrefixBytes));
            staged_ = 0;
            data_left_ = header_.length - kBlockPrefixBytes;
            h.block_begin(p, static_cast<uint32_t>(data_left_));
            state_ = State::data;
            if (data_left_ == 0) {
                h.block_end();
                state_ = State::header;
            }
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
        case State::stream_end_payload:
            if (!stage(in, 16)) return;
            staged_ = 0;
            state_ = State::ended;
            h.stream_end(decode_stream_end(std::span<const unsigned char>(stage_, 16)));
            break;
        case State::ended:
            throw Error(ErrorCode::protocol, "data after STREAM_END on a data stream");
        }
    }
}

} // namespace sluice::wire
