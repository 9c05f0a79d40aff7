// A get session's transfer on the ring: the manifest (ring_session.hpp). A file is a manifest
// of one entry, a tree one of many (directories before their contents, symlinks, empty
// files): its pages are encoded as the control connection takes them, and each page's files
// are planned when the receiver acknowledges it (minus the ranges it already holds: resume),
// as send() does; the blocks are then cut from the plan in entry order.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>

#include "core/wire/codec.hpp"
#include "serve/engine/shared.hpp"
#include "serve/get/ring_session.hpp"

namespace sluice::serve {

namespace {

constexpr size_t kPageEntries = 1024;        // an ack of a page fits kMaxControlFrame
constexpr size_t kPageBytes = 1u << 20;      // well under the receiver's 8 MiB frame
constexpr size_t kQueuedManifest = 256u << 10; // encoded ahead of the control socket
constexpr size_t kEntryFixedBytes = 36;      // a manifest entry without its path and target

} // namespace

void RingSession::open_files() {
    files_.resize(s_.src.entries.size());
    for (size_t i = 0; i < files_.size(); ++i) {
        if (s_.src.entries[i].kind != wire::EntryKind::file) continue;
        File& f = files_[i];
        f.fd = s_.src.fds[i].get();
        f.size = s_.src.entries[i].size;
        struct stat st {};
        if (::fstat(f.fd, &st) == 0) f.key = FileKey{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
        // As the HTTP engine's fds (file_cache.cpp): the kernel's readahead would bring pages in
        // past the pool's read, which cachestat counts while they are still read (the ring would
        // then wait for the disk sealing them); the pool asks for each block whole instead.
        if (sh_.cold_check) ::posix_fadvise(f.fd, 0, 0, POSIX_FADV_RANDOM); // advice: a refusal only costs a wait
    }
}

size_t RingSession::control_queued(const Link& l) const {
    return l.out.size() - l.out_off + l.wire.size() - l.wire_off;
}

void RingSession::send_pages(Link& l) {
    const std::vector<wire::ManifestEntry>& all = s_.src.entries;
    while (!manifest_ended_ && control_queued(l) < kQueuedManifest) {
        if (next_entry_ == all.size()) {
            wire::encode_manifest_end(
                l.out, wire::ManifestEnd{static_cast<uint32_t>(page_first_.size()), all.size(), s_.src.bytes});
            manifest_ended_ = true;
            return;
        }
        wire::ManifestPage page;
        page.seq = static_cast<uint32_t>(page_first_.size());
        page_first_.push_back(next_entry_);
        size_t bytes = 0;
        while (next_entry_ < all.size() && page.entries.size() < kPageEntries && bytes < kPageBytes) {
            const wire::ManifestEntry& e = all[next_entry_++];
            bytes += kEntryFixedBytes + e.path.size() + e.link_target.size();
            page.entries.push_back(e);
        }
        wire::encode_manifest(l.out, page);
    }
}

// The acked page's files minus what the receiver has verified already, as ranges in order.
void RingSession::plan(const wire::ManifestAck& a) {
    if (a.seq != pages_acked_ || a.seq >= page_first_.size())
        return fail(ErrorCode::protocol, "the client's receiver acknowledged manifest page " + std::to_string(a.seq) +
                                             " (expected " + std::to_string(pages_acked_) + ", of " +
                                             std::to_string(page_first_.size()) + " sent)");
    const uint64_t first = page_first_[a.seq];
    const uint64_t end = a.seq + 1 < page_first_.size() ? page_first_[a.seq + 1] : next_entry_;
    ++pages_acked_;
    std::vector<Range> have;
    for (const auto& r : a.verified) {
        if (r.file_id < first || r.file_id >= end || files_[r.file_id].fd < 0 || r.offset > files_[r.file_id].size ||
            r.length > files_[r.file_id].size - r.offset)
            return fail(ErrorCode::protocol, "the client's receiver reported verified bytes outside the page's files");
        if (r.length) have.push_back(Range{static_cast<uint32_t>(r.file_id), r.offset, r.offset + r.length});
    }
    std::sort(have.begin(), have.end(), [](const Range& x, const Range& y) { return x.file != y.file ? x.file < y.file : x.off < y.off; });
    auto h = have.begin();
    for (uint64_t id = first; id < end; ++id) {
        const File& f = files_[id];
        if (f.fd < 0) continue;
        uint64_t at = 0;
        for (; h != have.end() && h->file == id; ++h) {
            if (h->off > at) needed_.push_back(Range{static_cast<uint32_t>(id), at, h->off});
            at = std::max(at, h->end);
        }
        if (at < f.size) needed_.push_back(Range{static_cast<uint32_t>(id), at, f.size});
    }
}

bool RingSession::next_range(uint64_t most, Range& r) {
    std::deque<Range>& from = !resend_.empty() ? resend_ : needed_; // a range asked again larger than a block goes in blocks
    if (from.empty()) return false;
    Range& f = from.front();
    r = f;
    // Planned blocks start at multiples of `most` in their file, as send() cuts them.
    const uint64_t len = &from == &needed_ ? most - f.off % most : most;
    r.end = f.off + std::min(len, f.end - f.off);
    if (r.end == f.end)
        from.pop_front();
    else
        f.off = r.end;
    return true;
}

} // namespace sluice::serve
