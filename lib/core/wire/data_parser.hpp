#pragma once
// Incremental parser of a data stream: bytes in, frame events out, with no copy of block
// data (handlers get spans into the caller's buffer). Pure: no I/O, so it is unit-tested and
// fuzzed on its own. A rule broken by the peer throws a protocol Error.
#include <cstdint>
#include <span>

#include "core/wire/protocol.hpp"

namespace sluice::wire {

class DataFrameHandler {
public:
    virtual ~DataFrameHandler() = default;
    virtual void block_begin(const BlockPrefix& prefix, uint32_t data_length) = 0;
    virtual void block_data(std::span<const unsigned char> data) = 0;
    virtual void block_end() = 0;
    virtual void stream_end(const StreamEnd& end) = 0;
};

class DataFrameParser {
public:
    void feed(std::span<const unsigned char> in, DataFrameHandler& h);
    bool ended() const { return state_ == State::ended; }
    // True between frames: a connection closing here lost no partial frame.
    bool at_frame_boundary() const { return state_ == State::header && staged_ == 0; }

private:
    enum class State { header, prefix, data, stream_end_payload, ended };
    // Copies up to `want` bytes into the staging area; true once it holds `want`.
    bool stage(std::span<const unsigned char>& in, size_t want);

    State state_ = State::header;
    unsigned char stage_[32] = {};
    size_t staged_ = 0;
    FrameHeader header_;
    uint64_t data_left_ = 0;
};

} // namespace sluice::wire
