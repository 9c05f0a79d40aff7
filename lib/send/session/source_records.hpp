#pragma once
// The sender's records of the regular files it announced (issue 19, docs/protocol.md "Announce
// window"): what the data streams send from and what a RESEND names. With the announce window
// the receiver's FILES_DONE says below which id every file is complete; a record below that
// which nothing holds (SourceFile::hold: a queued or in-flight segment, an unanswered manifest
// page, a stream's open file) is freed, so the sender's memory follows the window, not the file
// count. Without FILES_DONE every record stays for the transfer, as before.
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <string>
#include <vector>

#include "core/wire/protocol.hpp"
#include "send/plan/source_tree.hpp"

namespace sluice {

class SourceRecords {
public:
    // Walk thread: a new record (ids ascending). Its address stays valid until it is freed, which
    // needs a FILES_DONE naming it and no holder.
    const SourceFile& add(SourceFile&& f);
    // Walk thread, once a manifest page went out: every entry id below `below` was sent.
    void sent_below(uint64_t below);
    // The record of `id`, held for the caller (let_go when done), or nullptr: never announced,
    // or freed.
    const SourceFile* hold(uint64_t id);
    bool contains(uint64_t id) const;
    // RESEND: the record the range names, held for its new segment; throws protocol Error for a
    // file never sent (or reported complete and freed) or a range outside it or over a block.
    const SourceFile& hold_resend(const wire::ByteRange& r, uint64_t block_size);
    // Control reader, FILES_DONE's `below`: throws protocol Error if it goes back or names
    // entries never sent. Frees the records below it that nothing holds; held ones are tried
    // again at the next call.
    void complete_below(uint64_t below);

    uint64_t count() const;     // files added
    uint64_t held_peak() const; // the most records in memory at once
    uint64_t freed() const;
    // The -v line: peak held, count, freed.
    std::string summary() const;

private:
    void free_unheld(); // under mu_

    mutable std::mutex mu_;
    // A node per record (one allocation): its address stays put as the map grows.
    std::unordered_map<uint64_t, SourceFile> by_id_;
    std::deque<uint64_t> order_;     // ids not yet freed or deferred, ascending
    std::vector<uint64_t> deferred_; // below the mark but still held
    uint64_t sent_below_ = 0, below_ = 0, count_ = 0, peak_ = 0, freed_ = 0;
};

} // namespace sluice
