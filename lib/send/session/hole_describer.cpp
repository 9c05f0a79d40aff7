#include "send/session/hole_describer.hpp"

#include "send/plan/sparse_extents.hpp"

namespace sluice {

void HoleDescriber::describe(wire::ManifestEntry& e, const std::string& src, Progress* progress, SessionLog& log) {
    if (!takes_) {
        if (fallback_.empty() && find_data_extents(src, e.size).sparse) {
            fallback_ = "sparse: the receiver does not take data extents: holes sent as zeros";
            log.verbose_line(fallback_);
        }
        return;
    }
    SparseLayout l = find_data_extents(src, e.size);
    if (!l.sparse) return;
    e.sparse = true;
    e.data_extents = std::move(l.extents);
    holes_ += l.hole_bytes;
    if (progress) progress->bytes_done += l.hole_bytes;
}

} // namespace sluice
