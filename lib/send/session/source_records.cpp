#include "send/session/source_records.hpp"

#include <algorithm>
#include <string>

#include "sluice/error.hpp"

namespace sluice {

const SourceFile& SourceRecords::add(SourceFile&& f) {
    const uint64_t id = f.file_id;
    std::lock_guard lk(mu_);
    order_.push_back(id);
    const SourceFile& r = by_id_.try_emplace(id, std::move(f)).first->second;
    ++count_;
    peak_ = std::max<uint64_t>(peak_, by_id_.size());
    return r;
}

void SourceRecords::sent_below(uint64_t below) {
    std::lock_guard lk(mu_);
    sent_below_ = std::max(sent_below_, below);
}

const SourceFile* SourceRecords::hold(uint64_t id) {
    std::lock_guard lk(mu_); // against complete_below(): a record found here is not freed meanwhile
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return nullptr;
    it->second.hold();
    return &it->second;
}

bool SourceRecords::contains(uint64_t id) const {
    std::lock_guard lk(mu_);
    return by_id_.contains(id);
}

void SourceRecords::complete_below(uint64_t below) {
    std::lock_guard lk(mu_);
    if (below < below_)
        throw Error(ErrorCode::protocol, "FILES_DONE reports every file below id " + std::to_string(below) +
                                             " complete after it reported below " + std::to_string(below_));
    if (below > sent_below_)
        throw Error(ErrorCode::protocol, "FILES_DONE reports every file below id " + std::to_string(below) +
                                             " complete, but only entries below " + std::to_string(sent_below_) +
                                             " were sent");
    below_ = below;
    free_unheld();
}

// A record still held below the mark is normal for a moment (a stream lets go of a file just
// after its last bytes went out, and a stream's reader keeps its open file until it moves on):
// it is deferred and tried again. A receiver that reports files complete before their data
// was sent keeps them held (queued segments): they are never freed under their holders.
void SourceRecords::free_unheld() {
    auto drop = [&](uint64_t id) {
        auto it = by_id_.find(id);
        if (it == by_id_.end()) return true;
        if (it->second.held()) return false;
        by_id_.erase(it);
        ++freed_;
        return true;
    };
    std::erase_if(deferred_, drop);
    while (!order_.empty() && order_.front() < below_) {
        if (!drop(order_.front())) deferred_.push_back(order_.front());
        order_.pop_front();
    }
}

uint64_t SourceRecords::count() const {
    std::lock_guard lk(mu_);
    return count_;
}

uint64_t SourceRecords::held_peak() const {
    std::lock_guard lk(mu_);
    return peak_;
}

uint64_t SourceRecords::freed() const {
    std::lock_guard lk(mu_);
    return freed_;
}

std::string SourceRecords::summary() const {
    std::lock_guard lk(mu_);
    return "file records: at most " + std::to_string(peak_) + " of " + std::to_string(count_) + " in memory at once, " +
           std::to_string(freed_) + " freed as the receiver reported them complete";
}

const SourceFile& SourceRecords::hold_resend(const wire::ByteRange& r, uint64_t block_size) {
    const SourceFile* f = hold(r.file_id);
    if (f && (r.offset > f->size || r.length > f->size - r.offset || r.length == 0 || r.length > block_size)) {
        f->let_go();
        f = nullptr;
    }
    if (!f)
        throw Error(ErrorCode::protocol, "receiver asked to resend a block that was never sent, or of a file it reported "
                                         "complete (file id " + std::to_string(r.file_id) + ")");
    return *f;
}

} // namespace sluice
