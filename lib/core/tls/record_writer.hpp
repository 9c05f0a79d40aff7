#pragma once
// The sending half of an encrypted data stream without a relay (docs/design.md,
// "Encryption"): one buffer of record slots per stream, allocated once, into which a send
// path reads file data straight (reserve(): the plain content of each record at its slot,
// sealed there in place) or copies small things (write(): frames of small files, STREAM_END),
// then sends the sealed records with one sendmsg. A record's slot is kMaxRecord bytes, so
// full records lie back to back and a block goes out as few iovecs.
//
// Sequence numbers follow the order records were reserved or written, not the order they
// were sealed: a block's data is sealed while it is still in the cache after its read, and
// its prefix (which carries the data's checksum) last, under the smaller number it took first.
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tls/record.hpp"

namespace sluice::tls {

// A writer's size for one block in place (the default --block-size): larger blocks are sent
// in parts of this (tls_record_sender.cpp).
inline constexpr size_t kWriterBytes = size_t{8} << 20;
// The block size of a transfer sealed in user space when the user chose none (send_core.cpp):
// small enough that a block read, hashed and sealed is still in the cache when it is sent.
inline constexpr size_t kSealedBlockBytes = size_t{1} << 20;

class RecordWriter {
public:
    // capacity: the most plain bytes one reserve() takes (rounded up to whole records).
    // what: "data stream 2", for messages.
    RecordWriter(int sock, const TrafficKey& tx, std::string what, size_t capacity);
    RecordWriter(const RecordWriter&) = delete;
    RecordWriter& operator=(const RecordWriter&) = delete;

    size_t capacity() const { return data_slots_ * kMaxPlain; }
    int socket() const { return sock_; }

    // Copies n plain bytes in, sealing each record as it fills; sends when the buffer is full.
    // Whole records of it that start on a record boundary are encrypted from p into their slots
    // instead (no copy first): the records are the same either way.
    void write(const unsigned char* p, size_t n);

    // In place: head bytes (at most kMaxPlain; 0 for none) in a record of their own, then
    // data bytes (at most capacity()) in fresh records. The caller fills head and each data
    // record's iovec (iov[k] is record k's content), may seal_data(k) the first k records as
    // they are filled, and commit()s; nothing else may come between.
    struct Reserved {
        unsigned char* head;
        iovec* iov;
        size_t records;
    };
    Reserved reserve(size_t head, size_t data);
    void seal_data(size_t upto);
    // Instead of filling records: seals the next records up to `upto` from `from`, their
    // content back to back there (an O_DIRECT buffer), encrypted into the slots with no copy.
    void seal_data_from(const unsigned char* from, size_t upto);
    void commit();

    // Seals what write() left in a partial record and sends everything sealed.
    void flush();

private:
    unsigned char* slot(size_t k) { return buf_.get() + k * kMaxRecord; }
    void seal_open();

    int sock_;
    Sealer sealer_;
    std::string what_;
    size_t data_slots_;
    size_t slots_; // data_slots_ plus one for a head and one for a partial record before it
    std::unique_ptr<unsigned char[]> buf_;
    std::vector<size_t> sizes_; // wire size of each sealed slot (0: not sealed)
    std::vector<iovec> iov_;    // a reservation's data records, then flush()'s iovecs
    std::vector<iovec> out_;
    size_t used_ = 0;           // slots taken
    bool open_ = false;         // slot used_ - 1 is a partial record of write()
    size_t fill_ = 0;           // its plain bytes
    // The reservation: head slot (or none), first data slot, count, sealed so far, sequence of the first.
    bool has_head_ = false;
    size_t head_len_ = 0, head_slot_ = 0, first_ = 0, count_ = 0, sealed_ = 0, last_len_ = 0;
    uint64_t seq_ = 0;
};

} // namespace sluice::tls
