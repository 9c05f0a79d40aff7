#include "core/tls/record_writer.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "core/io/socket.hpp"

namespace sluice::tls {

RecordWriter::RecordWriter(int sock, const TrafficKey& tx, std::string what, size_t capacity)
    : sock_(sock), sealer_(tx), what_(std::move(what)), data_slots_(std::max<size_t>(1, (capacity + kMaxPlain - 1) / kMaxPlain)),
      slots_(data_slots_ + 2), buf_(new unsigned char[slots_ * kMaxRecord]), sizes_(slots_, 0) {
    iov_.resize(data_slots_);
    out_.reserve(slots_);
}

void RecordWriter::seal_open() {
    if (!open_) return;
    sizes_[used_ - 1] = sealer_.seal(slot(used_ - 1), fill_);
    open_ = false;
}

void RecordWriter::write(const unsigned char* p, size_t n) {
    while (n > 0) {
        if (!open_) {
            if (used_ == slots_) flush();
            if (n >= kMaxPlain) {
                // A whole record's worth: encrypted from p into the slot, under the sequence
                // number it would take when sealed there (the same record byte for byte). Copied
                // into the slot and sealed in place, every byte of the small files' batch (their
                // O_DIRECT buffer, small_file_batch.cpp) was read and written once more
                // (memmove: 9% of the encrypted sender's samples on the minor set, h18r).
                sizes_[used_] = sealer_.seal_from(slot(used_), p, kMaxPlain, sealer_.take(1));
                ++used_;
                p += kMaxPlain;
                n -= kMaxPlain;
                continue;
            }
            ++used_;
            open_ = true;
            fill_ = 0;
        }
        const size_t take = std::min(n, kMaxPlain - fill_);
        std::memcpy(slot(used_ - 1) + kHeaderBytes + fill_, p, take);
        fill_ += take;
        p += take;
        n -= take;
        if (fill_ == kMaxPlain) seal_open();
    }
}

RecordWriter::Reserved RecordWriter::reserve(size_t head, size_t data) {
    seal_open();
    count_ = (data + kMaxPlain - 1) / kMaxPlain;
    has_head_ = head > 0;
    if (used_ + has_head_ + count_ > slots_) flush();
    head_len_ = head;
    head_slot_ = used_;
    used_ += has_head_;
    first_ = used_;
    used_ += count_;
    sealed_ = 0;
    last_len_ = data - (count_ ? (count_ - 1) * kMaxPlain : 0);
    for (size_t k = 0; k < count_; ++k)
        iov_[k] = {slot(first_ + k) + kHeaderBytes, k + 1 == count_ ? last_len_ : kMaxPlain};
    seq_ = sealer_.take(has_head_ + count_);
    return {has_head_ ? slot(head_slot_) + kHeaderBytes : nullptr, iov_.data(), count_};
}

void RecordWriter::seal_data(size_t upto) {
    for (; sealed_ < upto; ++sealed_)
        sizes_[first_ + sealed_] =
            sealer_.seal_at(slot(first_ + sealed_), iov_[sealed_].iov_len, seq_ + has_head_ + sealed_);
}

void RecordWriter::seal_data_from(const unsigned char* from, size_t upto) {
    for (; sealed_ < upto; ++sealed_) {
        const size_t n = iov_[sealed_].iov_len;
        sizes_[first_ + sealed_] = sealer_.seal_from(slot(first_ + sealed_), from, n, seq_ + has_head_ + sealed_);
        from += n;
    }
}

void RecordWriter::commit() {
    seal_data(count_);
    if (has_head_) sizes_[head_slot_] = sealer_.seal_at(slot(head_slot_), head_len_, seq_);
    has_head_ = false;
    count_ = 0;
}

void RecordWriter::flush() {
    seal_open();
    out_.clear();
    for (size_t k = 0; k < used_; ++k) {
        unsigned char* p = slot(k);
        // Back to back with the previous record (it was full): one iovec for both.
        if (!out_.empty() && static_cast<unsigned char*>(out_.back().iov_base) + out_.back().iov_len == p)
            out_.back().iov_len += sizes_[k];
        else
            out_.push_back({p, sizes_[k]});
        sizes_[k] = 0;
    }
    used_ = 0;
    size_t first = 0;
    while (first < out_.size()) {
        msghdr m{};
        m.msg_iov = out_.data() + first;
        m.msg_iovlen = std::min(out_.size() - first, size_t(IOV_MAX));
        ssize_t n = ::sendmsg(sock_, &m, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw_send_errno(what_ + " lost", errno);
        auto left = static_cast<size_t>(n);
        while (first < out_.size() && left >= out_[first].iov_len) left -= out_[first++].iov_len;
        if (left) {
            out_[first].iov_base = static_cast<unsigned char*>(out_[first].iov_base) + left;
            out_[first].iov_len -= left;
        }
    }
}

} // namespace sluice::tls
