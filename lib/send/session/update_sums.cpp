#include "send/session/update_sums.hpp"

#include <optional>
#include <string>

#include "send/plan/update_plan.hpp"
#include "sluice/sluice.hpp"

namespace sluice {

void UpdateSums::accept(wire::BlockSums&& s, bool known) {
    std::lock_guard lk(mu_);
    if (!known || sums_.contains(s.file_id))
        throw Error(ErrorCode::protocol, "receiver sent BLOCK_SUMS for file id " + std::to_string(s.file_id) +
                                             ", which is not a file of an unacknowledged page or was listed before");
    sums_.emplace(s.file_id, std::move(s));
}

void UpdateSums::take_unchanged(const std::vector<const SourceFile*>& files, std::vector<wire::ByteRange>& verified,
                                const std::function<void(const wire::Bytes&)>& send) {
    for (const SourceFile* f : files) {
        std::optional<wire::BlockSums> s;
        {
            std::lock_guard lk(mu_);
            auto it = sums_.find(f->file_id);
            if (it == sums_.end()) continue;
            s = std::move(it->second);
            sums_.erase(it);
        }
        std::vector<wire::Extent> same = unchanged_ranges(*f, *s, block_size_, mapped_refused_);
        if (same.empty()) continue;
        wire::Bytes out;
        wire::encode_reuse(out, wire::Reuse{.file_id = f->file_id, .ranges = same});
        send(out);
        for (const wire::Extent& x : same) {
            verified.push_back({f->file_id, x.offset, x.length});
            reused_ += x.length;
        }
    }
}

} // namespace sluice
