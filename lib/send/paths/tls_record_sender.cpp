// Send path "tls_records": an encrypted data stream without a relay (docs/design.md,
// "Encryption"). A block is read with preadv straight into the plain content of the stream's
// record slots (core/tls/record_writer.hpp), 16 records (256 KiB, L2-sized) at a time, each
// batch hashed and sealed in place while it is in the cache; then the BLOCK prefix, which
// carries the checksum, is sealed under the sequence number it took first, and the block goes
// out with one sendmsg. Per byte: the page-cache copy, AES-GCM in place, the socket copy;
// nothing allocated per block or record.
//
// A block larger than the writer (--block-size above 8 MiB) is hashed first with the
// reader's own pass and then sent a writer's worth at a time: one read more, said in -v.
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>

#include "core/checksum/xxh3.hpp"
#include "core/io/sys_error.hpp"
#include "core/tls/record_writer.hpp"
#include "core/wire/codec.hpp"
#include "send/paths/block_sender.hpp"

namespace sluice {

namespace {

constexpr size_t kPrefix = wire::kFrameHeaderBytes + wire::kBlockPrefixBytes;
constexpr size_t kBatch = 16; // records read, hashed and sealed together (256 KiB)

class TlsRecordSender final : public BlockSender {
public:
    explicit TlsRecordSender(tls::RecordWriter& w) : BlockSender(w.socket()), w_(w) {}
    const char* name() const override { return kRecordsPath; }
    std::string fallback() const override {
        return two_pass_ ? "tls_records: blocks above " + std::to_string(w_.capacity() >> 20) +
                               " MiB are read twice (once for the checksum)"
                         : std::string();
    }

    void send(const Segment& seg, bool) override {
        const int fd = reader_.open(*seg.file);
        reader_.check_unchanged(); // each block: a file written to meanwhile is an error, never sent torn
        if (seg.length <= w_.capacity()) {
            tls::RecordWriter::Reserved r = w_.reserve(kPrefix, seg.length);
            hash_.reset();
            fill(fd, seg, seg.offset, r, true);
            encode(seg, hash_.digest(), r.head);
            w_.commit();
        } else {
            two_pass_ = true;
            unsigned char prefix[kPrefix];
            encode(seg, reader_.checksum(*seg.file, seg.offset, seg.length), prefix);
            w_.write(prefix, kPrefix);
            for (uint64_t done = 0; done < seg.length;) {
                const size_t part = static_cast<size_t>(std::min<uint64_t>(w_.capacity(), seg.length - done));
                tls::RecordWriter::Reserved r = w_.reserve(0, part);
                fill(fd, seg, seg.offset + done, r, false);
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

    // Reads the reservation's records from offset (of the segment's file), kBatch at a time,
    // hashing (when hash) and sealing each batch.
    void fill(int fd, const Segment& seg, uint64_t offset, const tls::RecordWriter::Reserved& r, bool hash) {
        const SourceFile& f = *seg.file;
        uint64_t at = f.file_offset(offset);
        for (size_t k = 0; k < r.records; k += kBatch) {
            const size_t n = std::min(kBatch, r.records - k);
            iovec iov[kBatch];
            std::copy(r.iov + k, r.iov + k + n, iov);
            size_t want = 0;
            for (size_t j = 0; j < n; ++j) want += iov[j].iov_len;
            const size_t got = SourceReader::preadv_full(fd, f, iov, n, at);
            if (got < want) throw_source_shrank(f, f.file_offset(seg.offset), seg.length, at + got - f.file_offset(seg.offset));
            if (hash)
                for (size_t j = 0; j < n; ++j) hash_.update(r.iov[k + j].iov_base, r.iov[k + j].iov_len);
            w_.seal_data(k + n);
            at += want;
        }
    }

    tls::RecordWriter& w_;
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
