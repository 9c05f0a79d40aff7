// Receive path "splice": frame headers are read with recv(); block data moves socket -> pipe
// -> file at its offset through linked IORING_OP_SPLICE pairs (the pipe -> file step is the
// kernel's one copy into the page cache), then the checksum is computed by reading the
// written pages back with pread into a buffer the stream keeps for the whole transfer (not
// through a mapping: another process truncating the temporary file while a mapping of it is
// read would kill the receiver with SIGBUS; pread returns a short count, reported as an
// error naming the file).
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "core/io/pipe.hpp"
#include "core/io/socket.hpp"
#include "core/io/sys_error.hpp"
#include "recv/paths/stream_receiver.hpp"
#include "core/checksum/xxh3.hpp"
#include "core/ring/ring.hpp"
#include "core/wire/data_parser.hpp"

namespace sluice {

namespace {

constexpr unsigned kMaxPairs = 16;
constexpr unsigned kMaxSteps = 2 * kMaxPairs + 1; // the pipe's leftover to the file, then the pairs
constexpr uint64_t kFromSocket = 0, kToFile = 1;

class SpliceReceiver final : public StreamReceiver {
public:
    SpliceReceiver(int sock, unsigned index, RecvContext& ctx)
        : sock_(sock), index_(index), ctx_(ctx), pipe_(1 << 20), dirs_(ctx.tree), ring_(64) {
        set_stream_slices(sock, ctx); // the splices from the socket, and recv_patiently
    }

    StreamReceipt run() override {
        auto read = [this](unsigned char* p, size_t n) { recv_patiently(sock_, {p, n}, index_, ctx_, frames_.label()); };
        while (auto b = frames_.next(read)) receive_block(b->prefix, b->data_length);
        wire::refuse_data_after_end(frames_, sock_);
        return {frames_.counts().blocks, frames_.counts().bytes};
    }

private:
    void receive_block(const wire::BlockPrefix& p, uint64_t len) {
        // Named before the lookup, so the table never frees it under us (FileTable::Hold, as on
        // the direct path); the file open until now stays named until the switch.
        hold_.look(p.file_id);
        RecvFile& f = file_for_block(ctx_.files, p, len);
        if (open_file_ != &f) {
            open_fd_ = open_temp_file(dirs_, f);
            open_file_ = &f;
        }
        hold_.settle();
        splice_in(f, p.offset, len);
        bool ok = checksum_written(f, p.offset, len) == p.checksum;
        ctx_.bytes_received.fetch_add(len, std::memory_order_relaxed);
        if (ctx_.progress) ctx_.progress->bytes_done.fetch_add(len, std::memory_order_relaxed);
        if (ok)
            block_verified(ctx_, dirs_, f, open_fd_.get(), p.offset, len, p.checksum);
        else
            block_failed(ctx_, f, p.offset, len);
    }

    // XXH3 of what was just written at [offset, offset+len) of the temporary file, read back
    // through buf_ (in the page cache: the splice put it there).
    uint64_t checksum_written(const RecvFile& f, uint64_t offset, uint64_t len) {
        hash_.reset();
        uint64_t done = 0;
        while (done < len) {
            const size_t want = static_cast<size_t>(std::min<uint64_t>(kReadBytes, len - done));
            ssize_t n = ::pread(open_fd_.get(), buf_.get(), want, static_cast<off_t>(offset + done));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) throw_errno(ErrorCode::destination, "cannot read back '" + f.entry.path + "' to verify it");
            if (n == 0)
                throw Error(ErrorCode::destination, "the temporary file of '" + f.entry.path +
                                                        "' shrank while being received: expected " + std::to_string(len) +
                                                        " bytes at offset " + std::to_string(offset) + ", got " +
                                                        std::to_string(done) + " (another process truncated it)");
            hash_.update(buf_.get(), static_cast<size_t>(n));
            done += static_cast<uint64_t>(n);
        }
        return hash_.digest();
    }

    // Same accounting as the splice sender: a short step breaks the chain; what each step
    // really moved decides where the next round starts.
    void splice_in(const RecvFile& f, uint64_t offset, uint64_t len) {
        uint64_t from_socket = len; // still to take from the socket
        uint64_t in_pipe = 0;
        uint64_t file_pos = offset;
        while (from_socket || in_pipe) {
            unsigned n = 0;
            {
                auto chain = ring_.chain(kMaxSteps);
                if (in_pipe) {
                    steps_[n].tag = kToFile;
                    ring_.splice(steps_[n++], pipe_.read_fd(), -1, open_fd_.get(), static_cast<int64_t>(file_pos),
                                 static_cast<unsigned>(in_pipe), SPLICE_F_MOVE);
                }
                uint64_t planned = 0;
                while (planned < from_socket && n + 2 <= kMaxSteps) {
                    unsigned part = static_cast<unsigned>(std::min<uint64_t>(pipe_.size(), from_socket - planned));
                    steps_[n].tag = kFromSocket;
                    ring_.splice(steps_[n++], sock_, -1, pipe_.write_fd(), -1, part, SPLICE_F_MOVE);
                    steps_[n].tag = kToFile;
                    ring_.splice(steps_[n++], pipe_.read_fd(), -1, open_fd_.get(),
                                 static_cast<int64_t>(file_pos + in_pipe + planned), part, SPLICE_F_MOVE);
                    planned += part;
                }
            }
            for (unsigned i = 0; i < n; ++i)
                while (steps_[i].busy()) ring_.wait();
            for (unsigned i = 0; i < n; ++i) {
                const Completion& c = steps_[i];
                const bool to_file = c.tag == kToFile;
                // EAGAIN from the socket: SO_RCVTIMEO (one slice) passed in the io-wq worker
                // (the splice blocks like the system call) with nothing: the stream's silence
                // grows; once it lasts the idle timeout unexcused, retrying would wait forever.
                if (!to_file && c.outcome() == Completion::Outcome::retry && c.error() == EAGAIN && !quiet_.wait_again(ctx_))
                    throw stream_went_silent(index_, ctx_);
                if (c.outcome() == Completion::Outcome::cancelled || c.outcome() == Completion::Outcome::retry) continue;
                if (c.outcome() == Completion::Outcome::failed) {
                    if (to_file) throw_errno(ErrorCode::destination, "cannot write '" + f.entry.path + "'", c.error());
                    throw_errno(ErrorCode::network, "data stream " + std::to_string(index_), c.error());
                }
                const uint64_t r = static_cast<uint64_t>(c.result());
                if (to_file) {
                    if (r == 0) throw Error(ErrorCode::destination, "cannot write '" + f.entry.path + "': no progress");
                    in_pipe -= r;
                    file_pos += r;
                } else {
                    if (r == 0) throw stream_cut_short(index_, "'" + f.entry.path + "'");
                    credit_arrival(ctx_, r);
                    quiet_.heard();
                    in_pipe += r;
                    from_socket -= r;
                }
            }
        }
    }

    int sock_;
    unsigned index_;
    RecvContext& ctx_;
    Pipe pipe_;
    ParentDirCache dirs_;
    RecvFile* open_file_ = nullptr;
    FileTable::Hold& hold_ = ctx_.files.hold(index_);
    UniqueFd open_fd_;
    Completion steps_[kMaxSteps]; // tag: kFromSocket or kToFile
    // The checksum's read-back buffer: once per stream, L2-sized (the hash reads it hot).
    static constexpr size_t kReadBytes = kHashReadBytes; // core/checksum/xxh3.hpp: why not larger
    std::unique_ptr<unsigned char[]> buf_ = std::make_unique_for_overwrite<unsigned char[]>(kReadBytes);
    Xxh3 hash_;
    // After the pipe, file and completions its splices use: torn down (cancelling them) first.
    Ring ring_;
    wire::DataFrameReader frames_{"data stream " + std::to_string(index_)};
    StreamQuiet quiet_; // the socket splices' slices without bytes (a block's wait may span several)
};

} // namespace

std::unique_ptr<StreamReceiver> make_splice_receiver(int sock, unsigned index, RecvContext& ctx) {
    return std::make_unique<SpliceReceiver>(sock, index, ctx);
}

} // namespace sluice
