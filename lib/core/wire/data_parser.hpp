#pragma once
// The one reader of data-stream frames. DataFrameReader holds the rules (what a data stream
// may carry, the bounds, the stream-end counts, the messages); every receive path reads its
// frames through it, so a wire change is one edit here and the fuzzer covers what they all run.
// Pure: no I/O of its own (the caller passes how to read), so it is unit-tested and fuzzed alone.
// A rule broken by the peer throws a protocol Error.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "core/wire/protocol.hpp"

namespace sluice::wire {

// STREAM_END's payload: blocks u64, bytes u64.
inline constexpr size_t kStreamEndBytes = 16;

// A BLOCK frame up to its data; data_length bytes of data follow it on the wire.
struct BlockHeader {
    BlockPrefix prefix;
    uint32_t data_length = 0; // 1 .. kMaxBlockData
};

// What a stream carried, counted as its blocks were read and checked against STREAM_END.
struct StreamCounts {
    uint64_t blocks = 0;
    uint64_t bytes = 0;
};

// Pull-style: next() reads a frame up to its data and returns the block, or nothing once
// STREAM_END has arrived with counts that match. The caller reads the block's data itself
// (into its own buffer, pipe or file), all of it, before calling next() again.
class DataFrameReader {
public:
    // `label` names the stream in messages ("data stream 3").
    explicit DataFrameReader(std::string label = "data stream") : label_(std::move(label)) {}

    // read_exact(unsigned char* p, size_t n) fills p with the next n bytes of the stream or throws.
    template <class ReadExact> std::optional<BlockHeader> next(ReadExact&& read_exact) {
        if (ended_) data_after_end();
        unsigned char buf[kBlockPrefixBytes];
        read_exact(buf, kFrameHeaderBytes);
        const size_t part = on_header(std::span<const unsigned char>(buf, kFrameHeaderBytes));
        read_exact(buf, part);
        return on_part(std::span<const unsigned char>(buf, part));
    }

    // The two steps of next(), for a caller that is handed bytes instead (DataFrameParser).
    // After a frame header: how many bytes follow before the frame's data (BLOCK's prefix, or
    // STREAM_END's whole payload).
    size_t on_header(std::span<const unsigned char> header);
    // After those bytes: the block, or nothing (the stream ended and its counts match).
    std::optional<BlockHeader> on_part(std::span<const unsigned char> part);
    // Bytes after STREAM_END (in a buffer, or queued on the socket) break the protocol.
    [[noreturn]] void data_after_end() const;

    bool ended() const { return ended_; }
    const StreamCounts& counts() const { return counts_; }
    const std::string& label() const { return label_; }

private:
    static_assert(kBlockPrefixBytes >= kFrameHeaderBytes && kBlockPrefixBytes >= kStreamEndBytes);
    std::string label_;
    uint8_t type_ = 0; // of the frame whose part on_part expects
    uint32_t data_length_ = 0;
    bool ended_ = false;
    StreamCounts counts_;
};

// Refuses bytes the peer already queued after STREAM_END on sock (one non-blocking peek;
// bytes that arrive later are the session's to notice).
void refuse_data_after_end(const DataFrameReader& reader, int sock);

// Push-style, on the same rules: bytes in, frame events out, with no copy of block data
// (handlers get spans into the caller's buffer). For a path that receives whole buffers of
// back-to-back frames (recv_write).
class DataFrameHandler {
public:
    virtual ~DataFrameHandler() = default;
    virtual void block_begin(const BlockPrefix& prefix, uint32_t data_length) = 0;
    virtual void block_data(std::span<const unsigned char> data) = 0;
    virtual void block_end() = 0;
    // The counts matched (checked by the reader before this is called).
    virtual void stream_end(const StreamCounts& counts) = 0;
};

class DataFrameParser {
public:
    explicit DataFrameParser(std::string label = "data stream") : reader_(std::move(label)) {}
    void feed(std::span<const unsigned char> in, DataFrameHandler& h);
    bool ended() const { return reader_.ended(); }
    // True between frames: a connection closing here lost no partial frame.
    bool at_frame_boundary() const { return state_ == State::header && staged_ == 0; }
    // Bytes the sender is bound to send next: the rest of the frame it has begun, 0 between
    // frames (where it may pause: for an answer, the pacer, --streams auto). A receiver may
    // wait for this many at once (a low-water mark) without waiting on a pause.
    uint64_t owed() const {
        switch (state_) {
        case State::header: return staged_ ? kFrameHeaderBytes - staged_ : 0;
        case State::part: return part_ - staged_;
        case State::data: return data_left_;
        }
        return 0;
    }
    const StreamCounts& counts() const { return reader_.counts(); }
    const DataFrameReader& reader() const { return reader_; }

private:
    enum class State { header, part, data };
    // Copies up to `want` bytes into the staging area; true once it holds `want`.
    bool stage(std::span<const unsigned char>& in, size_t want);

    DataFrameReader reader_;
    State state_ = State::header;
    unsigned char stage_[kBlockPrefixBytes] = {};
    size_t staged_ = 0;
    size_t part_ = 0;
    uint64_t data_left_ = 0;
};

} // namespace sluice::wire
