// Send path "tls_records": an encrypted data stream without a relay (docs/design.md,
// "Encryption"). A block's plain bytes go into the content of the stream's record slots
// (core/tls/record_writer.hpp), 16 records (256 KiB, L2-sized) at a time, each batch hashed
// and sealed in place while it is in the cache; then the BLOCK prefix, which carries the
// checksum, is sealed under the sequence number it took first, and the block goes out with one
// sendmsg. Nothing allocated per block or record.
//
// Where the bytes come from: a block not in the page cache is read with O_DIRECT into the
// stream's aligned buffer, with the stream's next block's read already on the disk
// (direct_block_reader.hpp, as the clear paths' cold blocks), hashed there and encrypted from
// there into the record slots (AES-GCM is the copy); a cached block is read with preadv
// straight into the slots and sealed in place. A cold block no longer fills page-cache pages,
// nor makes the stream wait for the disk between its blocks (issue 18, h18o: 0.91-0.94 CPU
// s/GB at the sender and the disk idle 15-26% of a full-size encrypted run), nor is copied
// before the cipher.
//
// A block larger than the writer (--block-size above 8 MiB) is hashed first and then sent a
// writer's worth at a time: read from the disk twice when it came through the page cache
// (said in -v), once when it was read with O_DIRECT (hashed in the buffer).
#include <sys/uio.h>

#include <algorithm>

#include "core/checksum/xxh3.hpp"
#include "core/tls/record_writer.hpp"
#include "core/wire/codec.hpp"
#include "send/paths/block_sender.hpp"
#include "send/paths/direct_block_reader.hpp"

namespace sluice {

namespace {

constexpr size_t kPrefix = wire::kFrameHeaderBytes + wire::kBlockPrefixBytes;
constexpr size_t kBatch = 16; // records filled, hashed and sealed together (256 KiB)

class TlsRecordSender final : public BlockSender {
public:
    explicit TlsRecordSender(tls::RecordWriter& w) : BlockSender(w.socket()), w_(w) {}
    ~TlsRecordSender() override { direct_.stop(); } // a read ahead in flight is cancelled before its buffer goes
    const char* name() const override { return kRecordsPath; }
    std::string fallback() const override {
        std::string s = two_pass_ ? "tls_records: blocks above " + std::to_string(w_.capacity() >> 20) +
                                        " MiB read through the page cache are read twice (once for the checksum)"
                                  : std::string();
        if (!direct_.fallback().empty()) s += (s.empty() ? "" : "; ") + direct_.fallback();
        return s;
    }
    const DirectBlockReader* direct_reader() const override { return &direct_; }

    void send(const Segment& seg, bool, const Segment* next) override {
        // A cold block: its bytes, already checked against the listing, in the aligned buffer.
        const unsigned char* mem = direct_.read(seg, next) ? direct_.data() : nullptr;
        int fd = -1;
        if (!mem) {
            fd = reader_.open(*seg.file);
            reader_.check_unchanged(); // each block: a file written to meanwhile is an error, never sent torn
        }
        if (seg.length <= w_.capacity()) {
            tls::RecordWriter::Reserved r = w_.reserve(kPrefix, seg.length);
            hash_.reset();
            fill(fd, mem, seg, seg.offset, r, true);
            encode(seg, hash_.digest(), r.head);
            w_.commit();
        } else {
            unsigned char prefix[kPrefix];
            if (!mem) two_pass_ = true;
            encode(seg, mem ? xxh3_64(mem, seg.length) : reader_.checksum(*seg.file, seg.offset, seg.length), prefix);
            w_.write(prefix, kPrefix);
            for (uint64_t done = 0; done < seg.length;) {
                const size_t part = static_cast<size_t>(std::min<uint64_t>(w_.capacity(), seg.length - done));
                tls::RecordWriter::Reserved r = w_.reserve(0, part);
                fill(fd, mem ? mem + done : nullptr, seg, seg.offset + done, r, false);
                w_.commit();
                w_.flush();
                done += part;
            }
        }
        w_.flush();
    }

private:
    static void encode(const Segment& seg, uint64_t checksum, unsigned char* out) {
        wire::BlockPrefix p;
        p.file_id = seg.file->file_id;
        p.offset = seg.offset;
        p.checksum = checksum;
        wire::encode_block_prefix(out, p, static_cast<uint32_t>(seg.length));
    }

    // Fills the reservation's records with the segment's file from offset, kBatch at a time:
    // sealed from mem (the bytes at offset, read with O_DIRECT) into the slots or, without mem,
    // read from fd into the slots and sealed there; each batch hashed (when hash) first.
    void fill(int fd, const unsigned char* mem, const Segment& seg, uint64_t offset, const tls::RecordWriter::Reserved& r,
              bool hash) {
        const SourceFile& f = *seg.file;
        uint64_t at = f.file_offset(offset);
        for (size_t k = 0; k < r.records; k += kBatch) {
            const size_t n = std::min(kBatch, r.records - k);
            size_t want = 0;
            for (size_t j = 0; j < n; ++j) want += r.iov[k + j].iov_len;
            if (mem) {
                // Hashed where it was read, then encrypted from there into the slots.
                if (hash) hash_.update(mem, want);
                w_.seal_data_from(mem, k + n);
                mem += want;
            } else {
                iovec iov[kBatch];
                std::copy(r.iov + k, r.iov + k + n, iov);
                const size_t got = SourceReader::preadv_full(fd, f, iov, n, at);
                if (got < want)
                    throw_source_shrank(f, f.file_offset(seg.offset), seg.length, at + got - f.file_offset(seg.offset));
                if (hash)
                    for (size_t j = 0; j < n; ++j) hash_.update(r.iov[k + j].iov_base, r.iov[k + j].iov_len);
                w_.seal_data(k + n);
            }
            at += want;
        }
    }

    tls::RecordWriter& w_;
    DirectBlockReader direct_;
    Xxh3 hash_;
    bool two_pass_ = false;
};

} // namespace

std::unique_ptr<BlockSender> make_tls_record_sender(tls::RecordWriter& w, int idle_timeout_ms) {
    auto s = std::make_unique<TlsRecordSender>(w);
    s->set_idle_timeout(idle_timeout_ms);
    return s;
}

} // namespace sluice
