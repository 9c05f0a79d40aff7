// Receive path "hosted" (hosted_receiver.hpp): the steps of one data stream read by another
// loop. Between two receives everything this stream owes is done: the bytes received are
// parsed, written and their blocks verified in received(), so a break between receives leaves
// nothing in flight.
#include "recv/paths/hosted_receiver.hpp"

#include <unistd.h>

#include <cstring>

#include <fcntl.h>

#include <algorithm>

#include "core/io/sys_error.hpp"
#include "recv/paths/allocate_ahead.hpp"
#include "recv/paths/small_direct_files.hpp"

namespace sluice {

namespace {

constexpr size_t kBufferBytes = 2 << 20;
constexpr size_t kStageBytes = 2 << 20; // a multiple of direct_layout::kAlign
constexpr uint64_t kDirectMinBytes = SmallDirectFiles::kMaxBytes;

} // namespace

HostedReceiver::HostedReceiver(int sock, unsigned index, RecvContext& ctx, const tls::LinkKeys* keys)
    : sock_(sock), index_(index), ctx_(ctx), buf_(kBufferBytes), dirs_(ctx.tree), wait_(sock, ctx),
      parser_("data stream " + std::to_string(index)), hold_(ctx.files.hold(index)), stages_{AlignedBuffer(kStageBytes), AlignedBuffer(kStageBytes)} {
    if (keys) records_.emplace(keys->rx, "data stream " + std::to_string(index), kBufferBytes);
}

HostedStream::Read HostedReceiver::next_read() {
    // Marked for the rest of the frame begun. Encrypted, less the part of a record held
    // unopened (received but not parsed yet): every plain byte owed beyond it comes as at least
    // one byte on the wire, so the mark never asks for more than the sender is bound to send.
    // Without a mark an encrypted stream's receives brought a few records each, and each costs
    // a step on the pool.
    const size_t owed = static_cast<size_t>(parser_.owed());
    const size_t held = records_ ? records_->unopened() : 0;
    plan_ = wait_.arm(owed > held ? owed - held : 0);
    if (records_) return {records_->room(), records_->room_bytes(), plan_.marked, plan_.timeout};
    return {buf_.data(), kBufferBytes, plan_.marked, plan_.timeout};
}

bool HostedReceiver::timed_out() {
    if (wait_.wait_again(plan_)) return true; // the mark's deadline, or a slice of silence (hs3)
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
    if (!records_) {
        parser_.feed(std::span<const unsigned char>(buf_.data(), n), *this);
    } else {
        // A record at a time: one whose content is all data of the block begun is opened
        // straight where block_data() would copy it (the stage), the others into buf_.
        records_->arrived(n);
        while (const size_t size = records_->next_record()) {
            unsigned char* at = place(size - tls::kHeaderBytes - tls::kTagBytes);
            unsigned char* out = at ? at : buf_.data();
            const size_t plain = records_->open_next(out);
            parser_.feed(std::span<const unsigned char>(out, plain), *this);
        }
        records_->settle();
    }
    if (!parser_.ended()) return true;
    if (records_ && records_->mid_record()) parser_.reader().data_after_end(); // part of a record after STREAM_END
    wire::refuse_data_after_end(parser_.reader(), sock_);
    return false;
}

unsigned char* HostedReceiver::place(size_t room) {
    if (!block_file_ || block_end_ - write_pos_ < room) return nullptr;
    if (small_open_) return stage().data() + write_pos_; // the whole file fits (under 1 MiB of 2)
    if (!direct_fd_) return nullptr;
    if (staged_ == chunk_.length) {
        chunk_ = direct_layout::next_chunk(write_pos_, block_end_, kStageBytes);
        staged_ = 0;
    }
    return chunk_.length - staged_ >= room ? stage().data() + chunk_.skew + staged_ : nullptr;
}

StreamReceipt HostedReceiver::settle_after_break() {
    if (block_file_) ctx_.files.disown(*block_file_, block_off_, block_len_);
    block_file_ = nullptr;
    // A block whose last write did not land (the write failed): not whole, the sender's again.
    if (deferred_.file) {
        ctx_.files.disown(*deferred_.file, deferred_.off, deferred_.len);
        --whole_.blocks;
        whole_.bytes -= deferred_.len;
        deferred_ = {};
    }
    return whole_;
}

HostedStream::Write HostedReceiver::next_write() {
    if (!async_.len || async_out_) return {};
    async_out_ = true;
    return async_;
}

void HostedReceiver::wrote(int res) {
    const HostedStream::Write w = async_;
    async_ = {};
    async_out_ = false;
    async_current_ = false;
    if (res < 0) throw_errno(ErrorCode::destination, "cannot write '" + async_file_->entry.path + "'", -res);
    if (static_cast<unsigned>(res) < w.len)
        throw Error(ErrorCode::destination, "cannot write '" + async_file_->entry.path + "': short write (no space left?)");
    if (deferred_.file) {
        const Verdict v = deferred_;
        deferred_ = {};
        const int fd = held_open_ ? held_open_.get() : open_fd_.get();
        if (!v.ok)
            block_failed(ctx_, *v.file, v.off, v.len);
        else
            block_verified(ctx_, dirs_, *v.file, fd, v.off, v.len, v.sum);
    }
    held_direct_.reset();
    held_open_.reset();
}

void HostedReceiver::verdict(RecvFile& f, uint64_t off, uint64_t len, uint64_t sum, bool ok, int fd) {
    if (async_current_) { // asked for once its bytes are on disk: a resend must not meet them
        deferred_ = {&f, off, len, sum, ok};
        async_current_ = false;
        return;
    }
    if (!ok)
        block_failed(ctx_, f, off, len);
    else
        block_verified(ctx_, dirs_, f, fd, off, len, sum);
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
    block_end_ = p.offset + len;
    chunk_ = {};
    staged_ = 0;
    xxh_.reset();
    // A small file's one block takes a new unnamed inode each time (a resend too).
    const bool whole = p.offset == 0 && len == f.entry.size;
    if (open_file_ != &f || small_open_) switch_file(f, whole);
    hold_.settle();
}

void HostedReceiver::switch_file(RecvFile& f, bool whole) {
    // A file written through the page cache that this stream moved past: its pages go through
    // the window instead of staying cached (writeback_window.hpp); O_DIRECT files left none.
    if (open_file_ && !direct_fd_ && !small_open_) written_.add(std::move(open_fd_), open_file_->entry.size);
    // The loop may still be writing a chunk of the file left: its fds stay until that lands.
    if (async_.len && direct_fd_ && async_.fd == direct_fd_.get()) {
        held_direct_ = std::move(direct_fd_);
        held_open_ = std::move(open_fd_);
    }
    open_fd_.reset();
    direct_fd_.reset();
    small_open_ = false;
    open_file_ = nullptr;
    // --verify reads the file back by its temporary name, so it keeps one.
    if (whole && f.entry.size > 0 && f.entry.size < kDirectMinBytes && small_.enabled() && !ctx_.verify && !fb_.tmpfile_refused) {
        open_fd_ = open_unnamed_file(dirs_, f, fb_.tmpfile_refused);
        if (open_fd_) {
            small_open_ = true;
            open_file_ = &f;
            return;
        }
    }
    // Written only when set: the streams that share a file of several blocks all come here.
    if (f.unnamed) f.unnamed = false;
    open_fd_ = open_temp_file(dirs_, f);
    open_file_ = &f;
    if (f.entry.size < kDirectMinBytes || fb_.direct_refused) return;
    direct_fd_.reset(::openat(dirs_.get(f.parent), f.temp.c_str(), O_WRONLY | O_DIRECT | O_NOFOLLOW | O_CLOEXEC));
    if (direct_fd_) return;
    if (errno != EINVAL) throw_errno(ErrorCode::destination, "cannot open '" + f.entry.path + "' for O_DIRECT writes");
    fb_.direct_refused = true; // e.g. tmpfs: said in the stats as a fallback
}

void HostedReceiver::block_data(std::span<const unsigned char> d) {
    xxh_.update(d.data(), d.size());
    ctx_.bytes_received.fetch_add(d.size(), std::memory_order_relaxed);
    if (ctx_.progress) ctx_.progress->bytes_done.fetch_add(d.size(), std::memory_order_relaxed);
    if (small_open_) { // staged whole, written at the block's end
        if (d.data() != stage().data() + write_pos_) std::memcpy(stage().data() + write_pos_, d.data(), d.size());
        write_pos_ += d.size();
        return;
    }
    if (!direct_fd_) {
        pwrite_whole(open_fd_.get(), d.data(), d.size(), write_pos_, block_file_->entry.path);
        write_pos_ += d.size();
        return;
    }
    while (!d.empty()) {
        if (staged_ == chunk_.length) {
            chunk_ = direct_layout::next_chunk(write_pos_, block_end_, kStageBytes);
            staged_ = 0;
        }
        const size_t take = std::min(d.size(), chunk_.length - staged_);
        unsigned char* at = stage().data() + chunk_.skew + staged_;
        if (d.data() != at) std::memcpy(at, d.data(), take); // else opened there (place())
        staged_ += take;
        write_pos_ += take;
        d = d.subspan(take);
        if (staged_ == chunk_.length) write_chunk(*block_file_);
    }
}

void HostedReceiver::write_chunk(const RecvFile& f) {
    unsigned char* buf = stage().data();
    const direct_layout::Plan plan = direct_layout::plan_chunk(chunk_, f.entry.size);
    // Pages shared with a neighbouring block (which another stream may be writing now):
    // through the page cache, which merges the two parts; O_DIRECT only covers pages no other
    // block has bytes in (direct_layout.hpp).
    for (const direct_layout::Run* r : {&plan.head, &plan.tail}) {
        if (!r->length) continue;
        pwrite_whole(open_fd_.get(), buf + r->at, r->length, r->offset, f.entry.path);
        ++fb_.shared_page_writes;
    }
    if (!plan.direct.length) return;
    allocate_ahead(*block_file_, direct_fd_.get(), plan.direct.offset, plan.direct.offset + plan.direct.length, allocate_refused_);
    if (plan.direct_padded != plan.direct.length)
        std::memset(buf + plan.direct.at + plan.direct.length, 0, plan.direct_padded - plan.direct.length);
    if (!async_.len) { // the loop writes it while the next receive is in flight
        async_ = {direct_fd_.get(), buf + plan.direct.at, static_cast<unsigned>(plan.direct_padded), plan.direct.offset};
        async_file_ = &f;
        async_current_ = true;
        cur_ ^= 1;
        return;
    }
    pwrite_whole(direct_fd_.get(), buf + plan.direct.at, plan.direct_padded, plan.direct.offset, f.entry.path);
}

void HostedReceiver::block_end() {
    RecvFile& f = *block_file_;
    if (small_open_) {
        const size_t size = static_cast<size_t>(f.entry.size);
        if (const size_t pages = small_.write_tail(f, open_fd_.get(), stage().data(), size))
            pwrite_whole(open_fd_.get(), stage().data(), pages, 0, f.entry.path);
    }
    block_file_ = nullptr;
    ++whole_.blocks;
    whole_.bytes += block_len_;
    verdict(f, block_off_, block_len_, block_sum_, xxh_.digest() == block_sum_, open_fd_.get());
}

} // namespace sluice
