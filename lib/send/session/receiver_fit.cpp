#include "send/session/receiver_fit.hpp"

#include <unistd.h>

#include "core/wire/codec.hpp"
#include "send/plan/sparse_extents.hpp"
#include "sluice/progress.hpp"
#include "sluice/sluice.hpp"

namespace sluice {

void ReceiverFit::fit_tree(TreeOptions& tree, bool delete_extraneous, const std::string& peer) {
    if (features_ & wire::kFeatureTreeMeta) {
        if ((tree.xattrs || tree.acls) && !(features_ & wire::kFeatureExactMeta))
            log_.verbose_line("attributes and ACLs removed here are not removed at " + peer +
                              " on entries it keeps in place (it does not offer hello feature bit 8: an older sluice)");
        return;
    }
    if (delete_extraneous)
        throw Error(ErrorCode::usage, "the receiver at " + peer +
                                          " cannot delete extraneous files (it does not offer tree metadata, hello "
                                          "feature bit 3: an older sluice): update it or leave out --delete");
    const bool lost = tree.hard_links || tree.any_meta() || tree.specials;
    tree.hard_links = tree.owner = tree.group = tree.xattrs = tree.acls = tree.specials = false;
    if (!lost) return;
    tree_fallback_ = "tree metadata: the receiver does not keep owners, xattrs, ACLs, hard links or special files "
                     "(it does not offer hello feature bit 3): hard links sent as copies, special files skipped";
    log_.line("warning: " + tree_fallback_);
}

std::optional<wire::Bytes> ReceiverFit::tree_options(const TreeOptions& tree, bool delete_extraneous, bool dry_run,
                                                     const std::string& peer) const {
    const bool maps = !tree.usermap.empty() || !tree.groupmap.empty();
    const uint32_t exact = exact_flags(features_, tree, ::geteuid() == 0);
    if (!delete_extraneous && !dry_run && !maps && !exact) return std::nullopt;
    // Without tree metadata no owners are sent (fit_tree warned): maps have nothing to map.
    if (!(features_ & wire::kFeatureTreeMeta) && !delete_extraneous && !dry_run) return std::nullopt;
    if (!(features_ & wire::kFeatureTreeMeta))
        throw Error(ErrorCode::usage, "the receiver at " + peer + std::string(" cannot ") +
                                          (dry_run ? "do a dry run" : "delete extraneous files") +
                                          " (it does not offer tree metadata, hello feature bit 3: an older sluice)");
    wire::Bytes out;
    wire::encode_tree_options(out, wire::TreeOptionsFrame{
                                       .flags = (delete_extraneous ? wire::TreeOptionsFrame::kDelete : 0u) |
                                                (dry_run ? wire::TreeOptionsFrame::kDryRun : 0u) |
                                                (maps ? wire::TreeOptionsFrame::kOwnerMaps : 0u) |
                                                (tree.user_chown ? wire::TreeOptionsFrame::kUserChown : 0u) |
                                                (tree.group_chown ? wire::TreeOptionsFrame::kGroupChown : 0u) | exact,
                                       .rules = tree.filters.texts(),
                                       .usermap = tree.usermap,
                                       .groupmap = tree.groupmap});
    return out;
}

uint32_t ReceiverFit::exact_flags(uint16_t features, const TreeOptions& tree, bool root) {
    if (!(features & wire::kFeatureTreeMeta) || !(features & wire::kFeatureExactMeta)) return 0;
    uint32_t f = 0;
    if (tree.xattrs) f |= wire::TreeOptionsFrame::kExactXattrs | (root ? wire::TreeOptionsFrame::kExactTrusted : 0u);
    if (tree.acls) f |= wire::TreeOptionsFrame::kExactAcls;
    return f;
}

void ReceiverFit::describe_holes(wire::ManifestEntry& e, const std::string& src, uint64_t allocated) {
    if (!(features_ & wire::kFeatureSparse)) {
        if (!sparse_refused_logged_ && find_data_extents(src, e.size, allocated).sparse) {
            sparse_refused_logged_ = true;
            sparse_fallback_ = "sparse: the receiver does not take data extents: holes sent as zeros";
            log_.verbose_line(sparse_fallback_);
        }
        return;
    }
    SparseLayout l = find_data_extents(src, e.size, allocated);
    if (!l.sparse) return;
    e.sparse = true;
    e.data_extents = std::move(l.extents);
    holes_ += l.hole_bytes;
    if (progress_) progress_->bytes_done += l.hole_bytes;
}

void ReceiverFit::add_fallbacks(std::vector<std::string>& out) const {
    if (!sparse_fallback_.empty()) out.push_back(sparse_fallback_);
    if (!tree_fallback_.empty()) out.push_back(tree_fallback_);
}

} // namespace sluice
