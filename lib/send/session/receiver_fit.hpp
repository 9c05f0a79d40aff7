#pragma once
// What the sender leaves out for what the receiver offered in its hello (docs/protocol.md,
// "Handshake"): data extents of sparse files (bit 1) and tree metadata (bit 3). What is left
// out is said once, in the log and in the stats' fallbacks: never a silent downgrade.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/session/session_log.hpp"
#include "core/wire/codec.hpp"
#include "core/wire/protocol.hpp"
#include "send/plan/tree_reader.hpp"

namespace sluice {

struct Progress;

class ReceiverFit {
public:
    ReceiverFit(uint16_t features, SessionLog& log, Progress* progress)
        : features_(features), log_(log), progress_(progress) {}

    // Before the walk. Without bit 3 (an older receiver): hard links go as copies, owners,
    // xattrs and ACLs are left out and special files skipped (a warning each); --delete
    // cannot be honoured, so it is refused (Error usage naming `peer`) before anything is sent.
    void fit_tree(TreeOptions& tree, bool delete_extraneous, const std::string& peer);
    // TREE_OPTIONS for --delete and --dry-run (their filter rules), or nothing when neither is
    // on. Both need bit 3: a receiver without it could not honour them (an older one would
    // write what a dry run must not), so they are refused (Error usage naming `peer`) first.
    // Also sent, alone if need be, to a receiver offering kFeatureExactMeta (ServerHello bit 8)
    // while xattrs or ACLs are sent: exact_flags() says their lists are complete.
    std::optional<wire::Bytes> tree_options(const TreeOptions& tree, bool delete_extraneous, bool dry_run,
                                            const std::string& peer) const;
    // The TREE_OPTIONS kExact* flags for what this sender sends: none unless the receiver offered
    // kFeatureExactMeta; trusted.* only when the sender can read them (root), since a list
    // without them says nothing about them.
    static uint32_t exact_flags(uint16_t features, const TreeOptions& tree, bool root);

    // A file with holes lists its data extents in its entry where the receiver offered sparse
    // files; only those are planned and sent. Otherwise its holes go as zeros.
    void describe_holes(wire::ManifestEntry& e, const std::string& src, uint64_t allocated);

    uint64_t holes() const { return holes_; } // bytes of holes described instead of sent
    void add_fallbacks(std::vector<std::string>& out) const;

private:
    uint16_t features_;
    SessionLog& log_;
    Progress* progress_;
    uint64_t holes_ = 0;
    bool sparse_refused_logged_ = false;
    std::string sparse_fallback_;
    std::string tree_fallback_;
};

} // namespace sluice
