// Receive path "hosted" (hosted_receiver.hpp): the steps of one data stream read by another
// loop. Between two receives everything this stream owes is done: the bytes received are
// parsed, written and their blocks verified in received(), so a break between receives leaves
// nothing in flight.
#include "recv/paths/hosted_receiver.hpp"

#include <unistd.h>

#include <cstring>

#include "core/io/sys_error.hpp"

namespace sluice {

namespace {

constexpr size_t kBufferBytes = 2 << 20;

} // namespace

HostedReceiver::HostedReceiver(int sock, unsigned index, RecvContext& ctx, const tls::LinkKeys* keys)
    : sock_(sock), index_(index), ctx_(ctx), buf_(kBufferBytes), dirs_(ctx.tree), wait_(sock, ctx.idle_timeout_ms, ctx.marks),
      parser_("data stream " + std::to_string(index)), hold_(ctx.files.hold(index)) {
    if (keys) records_.emplace(keys->rx, "data stream " + std::to_string(index), kBufferBytes);
}

HostedStream::Read HostedReceiver::next_read() {
    // Marked for the rest of the frame begun; not when encrypted (part of a record held
    // undecrypted is received but not parsed, so the plain bytes owed overstate what is to come).
    plan_ = wait_.arm(records_ ? 0 : static_cast<size_t>(parser_.owed()));
    if (records_) return {records_->room(), records_->room_bytes(), false, plan_.timeout};
    return {buf_.data(), kBufferBytes, plan_.marked, plan_.timeout};
}

bool HostedReceiver::timed_out() {
    if (wait_.fell_back(plan_) || silence_excused(ctx_)) return true;
    throw stream_went_silent(index_, ctx_);
}

Error HostedReceiver::broke(int err) const {
    return Error(ErrorCode::network, "data stream " + std::to_string(index_) + ": " + std::strerror(err), cause_of_errno(err));
}

bool HostedReceiver::received(size_t n) {
    wait_.took(plan_, n);
    if (n == 0) {
        if (parser_.ended() && !(records_ && records_->mid_record())) return false;
        throw stream_cut_short(index_);
    }
    if (records_) n = records_->open(n, buf_.data());
    parser_.feed(std::span<const unsigned char>(buf_.data(), n), *this);
    if (!parser_.ended()) return true;
    if (records_ && records_->mid_record()) parser_.reader().data_after_end(); // part of a record after STREAM_END
    wire::refuse_data_after_end(parser_.reader(), sock_);
    return false;
}

StreamReceipt HostedReceiver::settle_after_break() {
    if (block_file_) ctx_.files.disown(*block_file_, block_off_, block_len_);
    block_file_ = nullptr;
    return whole_;
}

void HostedReceiver::block_begin(const wire::BlockPrefix& p, uint32_t len) {
    // Named before the lookup, so the table never frees it under us (FileTable::Hold); the
    // file open until now stays named until the switch below no longer touches it.
    hold_.look(p.file_id);
    RecvFile& f = file_for_block(ctx_.files, p, len);
    block_file_ = &f;
    block_off_ = write_pos_ = p.offset;
    block_len_ = len;
    block_sum_ = p.checksum;
    xxh_.reset();
    if (open_file_ != &f) {
        // The file this stream moved past is written: its pages go through the window
        // instead of staying cached (writeback_window.hpp).
        if (open_file_) written_.add(std::move(open_fd_), open_file_->entry.size);
        open_fd_ = open_temp_file(dirs_, f);
        open_file_ = &f;
    }
    hold_.settle();
}

void HostedReceiver::block_data(std::span<const unsigned char> d) {
    xxh_.update(d.data(), d.size());
    size_t done = 0;
    while (done < d.size()) {
        const ssize_t w = ::pwrite(open_fd_.get(), d.data() + done, d.size() - done, static_cast<off_t>(write_pos_ + done));
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) throw_errno(ErrorCode::destination, "cannot write '" + block_file_->entry.path + "'");
        if (w == 0) throw Error(ErrorCode::destination, "cannot write '" + block_file_->entry.path + "': no progress");
        done += static_cast<size_t>(w);
    }
    write_pos_ += d.size();
    ctx_.bytes_received.fetch_add(d.size(), std::memory_order_relaxed);
    if (ctx_.progress) ctx_.progress->bytes_done.fetch_add(d.size(), std::memory_order_relaxed);
}

void HostedReceiver::block_end() {
    RecvFile& f = *block_file_;
    block_file_ = nullptr;
    ++whole_.blocks;
    whole_.bytes += block_len_;
    if (xxh_.digest() != block_sum_)
        block_failed(ctx_, f, block_off_, block_len_);
    else
        block_verified(ctx_, dirs_, f, open_fd_.get(), block_off_, block_len_, block_sum_);
}

} // namespace sluice
