#pragma once
// Receive path "hosted": one data stream whose socket another loop reads (a `sluice serve`
// ring: core/session/hosted_streams.hpp). Each receive lands in the stream's buffer (or, when
// encrypted, its record buffer, opened into that buffer: AES-GCM is the copy); the blocks parsed
// from it are written at their offsets with pwrite, summed while hot, and verified, journaled and
// finished by the same steps as every path (file_finisher.cpp). One receive in flight, and the
// next only once the last one's bytes are written: the socket's own buffer keeps the sender
// going meanwhile, and the stream holds one buffer whatever the sender does. Within a block the
// receive waits under a low-water mark (marked_wait.hpp), as recv_write's does.
#include <optional>
#include <vector>

#include "core/checksum/xxh3.hpp"
#include "core/io/aligned_buffer.hpp"
#include "core/session/hosted_streams.hpp"
#include "core/tls/record_reader.hpp"
#include "core/wire/data_parser.hpp"
#include "recv/paths/marked_wait.hpp"
#include "recv/paths/stream_receiver.hpp"
#include "recv/paths/writeback_window.hpp"

namespace sluice {

inline constexpr const char* kHostedRecvPath = "hosted";
inline constexpr const char* kRecordsHostedRecvPath = "tls_hosted";

class HostedReceiver final : wire::DataFrameHandler {
public:
    // keys: the stream is encrypted (its handshake is done); null: clear.
    HostedReceiver(int sock, unsigned index, RecvContext& ctx, const tls::LinkKeys* keys);
    // HostedStream's steps (see there).
    HostedStream::Read next_read();
    bool timed_out();
    bool received(size_t n);
    Error broke(int err) const;
    // After a break (nothing is in flight between receives): the block cut short is disowned
    // (the sender sends it again, on any stream) and the blocks that arrived whole are counted.
    StreamReceipt settle_after_break();
    StreamReceipt receipt() const { return {parser_.counts().blocks, parser_.counts().bytes}; }

private:
    void block_begin(const wire::BlockPrefix& p, uint32_t len) override;
    void block_data(std::span<const unsigned char> d) override;
    void block_end() override;
    void stream_end(const wire::StreamCounts&) override {}

    int sock_;
    unsigned index_;
    RecvContext& ctx_;
    AlignedBuffer buf_;
    ParentDirCache dirs_;
    Xxh3 xxh_;
    MarkedWait wait_;
    MarkedWait::Plan plan_{}; // of the receive in flight
    wire::DataFrameParser parser_;
    std::optional<tls::RecordReader> records_; // encrypted: what the socket is read into
    FileTable::Hold& hold_;
    RecvFile* block_file_ = nullptr; // the block begun (claimed: FileTable::claim) until its end
    uint64_t block_off_ = 0, block_len_ = 0, block_sum_ = 0, write_pos_ = 0;
    StreamReceipt whole_; // blocks that arrived whole (a reconnect's STREAM_RESUME)
    RecvFile* open_file_ = nullptr;
    UniqueFd open_fd_;
    WritebackWindow written_;
};

} // namespace sluice
