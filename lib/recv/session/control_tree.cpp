// ControlSide's tree-wide parts (control_side.hpp): TREE_OPTIONS (--delete, --dry-run), OWNER_NAMES, the
// refusal of tree metadata a sender did not announce, the entries a released slab leaves for
// the end, and --dry-run's answers (docs/protocol.md "Dry run").
#include <algorithm>

#include "core/wire/codec.hpp"
#include "recv/session/control_side.hpp"
#include "recv/session/finishing.hpp"

namespace sluice {

void ControlSide::on_tree_options(wire::TreeOptionsFrame&& t) {
    // Before the first page: how the tree is mirrored is fixed before any entry lands.
    if (pages_ != 0 || tree_options_) throw Error(ErrorCode::protocol, "TREE_OPTIONS after the manifest began");
    if (!(sender_features_ & wire::kFeatureTreeMeta))
        throw Error(ErrorCode::protocol, "TREE_OPTIONS from a sender that did not announce tree metadata (hello feature bit 3)");
    tree_options_ = true;
    if (t.flags & wire::TreeOptionsFrame::kDryRun) {
        if (!target_.writes_files())
            throw Error(ErrorCode::destination, "--dry-run: this receiver has no directory to compare with (it writes to " +
                                                    target_.tree().display() + ")");
        dry_.emplace(target_.tree(), tree_meta_);
        log_.verbose_line("dry run: the sender asks what this transfer would change; nothing is written");
    }
    if (t.flags & wire::TreeOptionsFrame::kDelete) {
        mirror_.emplace(t, [this] { still_working(); });
        // Not in a dry run: the replacer changes the tree (the dry run's sweep lists instead).
        if (!dry_) files_.set_dir_replacer(&mirror_->replacer());
    }
    if (t.flags & wire::TreeOptionsFrame::kOwnerMaps)
        tree_meta_.add_sender_maps(t.usermap, t.groupmap, t.flags & wire::TreeOptionsFrame::kUserChown,
                                   t.flags & wire::TreeOptionsFrame::kGroupChown);
    if (t.flags & wire::TreeOptionsFrame::kExactMask) {
        tree_meta_.set_exact(t.flags & wire::TreeOptionsFrame::kExactMask);
        log_.verbose_line("exact attribute lists: attributes and ACLs the sender's entries lack are removed here");
    }
    // Exact lists alone need no entry kept past its release: its attributes are applied then.
    if (!(t.flags & ~wire::TreeOptionsFrame::kExactMask)) return;
    if (files_.releasing()) log_.verbose_line("complete entries kept: --delete and --dry-run look at every path sent at the end");
    files_.allow_release(false);
}

// Names of ids the next pages use: before MANIFEST_END, from a sender that announced tree
// metadata (the only one that sends owners).
void ControlSide::on_owner_names(const std::vector<wire::OwnerName>& names) {
    if (!(sender_features_ & wire::kFeatureTreeMeta))
        throw Error(ErrorCode::protocol, "OWNER_NAMES from a sender that did not announce tree metadata (hello feature bit 3)");
    if (manifest_ended_) throw Error(ErrorCode::protocol, "OWNER_NAMES after MANIFEST_END");
    tree_meta_.add_owner_names(names);
}

// Nothing is received: the ack says the file is complete, so the sender sends none of it.
void ControlSide::dry_run_file(RecvFile& f, std::vector<wire::ByteRange>& already) {
    if (f.entry.size) already.push_back({f.entry.file_id, 0, f.entry.size});
    files_.set_complete(f);
    tally_.files_completed.fetch_add(1, std::memory_order_relaxed);
    if (opts_.progress) opts_.progress->files_done += 1;
}

void ControlSide::send_dry_run_page() {
    std::vector<wire::DryRunItem> items = dry_->take_page();
    if (items.empty()) return;
    wire::Bytes out;
    wire::encode_dry_run_items(out, items);
    send(out);
}

void ControlSide::dry_run_end(const std::function<void()>& working) {
    log_.verbose_line("dry run: nothing in " + target_.tree().display() + " was changed");
    if (!mirror_) return;
    // In frames of about 1 MiB, well under the control frame limit.
    wire::DryRunDeleted d;
    size_t bytes = 0;
    auto flush = [&] {
        if (d.paths.empty()) return;
        wire::Bytes out;
        wire::encode_dry_run_deleted(out, d);
        send(out);
        d.paths.clear();
        bytes = 0;
    };
    for (wire::DryRunDeleted::Path& p : mirror_->list_extraneous(target_.tree(), files_, working)) {
        log_.verbose_line("would delete '" + p.path + (p.is_dir ? "/'" : "'"));
        bytes += 3 + p.path.size();
        d.paths.push_back(std::move(p));
        if (bytes >= (1u << 20)) flush();
    }
    flush();
}

// --delete before the directories' times and modes (apply_dir_metadata): removing an entry sets
// its directory's mtime (it came out as the time of the transfer, not the sender's), and a
// directory whose mode lacks u+w could not be emptied by a receiver that is not root. A
// directory where the source now has a link, symlink or special file is left by the sweep and
// gives way when that entry is made (dir_replacer.hpp), as one in a file's way did when the
// file was complete.
void ControlSide::delete_and_link(const std::function<void()>& working) {
    if (mirror_) {
        deleted_ = mirror_->delete_extraneous(target_.tree(), files_, working);
        for (const std::string& d : deleted_) log_.verbose_line("deleted '" + d + "'");
    }
    tree_meta_.make_links_and_specials(target_.tree(), files_, working);
    make_symlinks(target_.tree(), links_, working, files_.dir_replacer());
    if (!mirror_) return;
    for (std::string& d : mirror_->replacer().take_removed()) {
        log_.verbose_line("deleted '" + d + "'");
        deleted_.push_back(std::move(d));
    }
}

// Directories and symlinks are made or finished at the end: a released slab's are copied out
// (and counted) and dirs_/links_ point at the copies. Both lists are in id order.
void ControlSide::keep_released(std::span<const RecvFile> entries) {
    for (const RecvFile& f : entries) {
        const wire::EntryKind k = f.entry.kind;
        if (k != wire::EntryKind::directory && k != wire::EntryKind::symlink) continue;
        auto& list = k == wire::EntryKind::directory ? dirs_ : links_;
        auto it = std::lower_bound(list.begin(), list.end(), f.entry.file_id,
                                   [](const wire::ManifestEntry* e, uint64_t id) { return e->file_id < id; });
        if (it == list.end() || *it != &f.entry) throw Error(ErrorCode::internal, "a released entry is not in its list");
        files_.count_copy(f.entry);
        *it = &kept_.emplace_back(f.entry);
    }
}

void ControlSide::refuse_tree_meta(const wire::ManifestPage& page) const {
    const char* what = nullptr;
    for (const auto& e : page.entries)
        if (!what && static_cast<uint8_t>(e.kind) >= static_cast<uint8_t>(wire::EntryKind::hard_link))
            what = "a hard link or special file entry";
    if (!what && !page.meta.empty()) what = "a metadata trailer";
    if (what)
        throw Error(ErrorCode::protocol,
                    std::string("the sender sent ") + what + " without announcing tree metadata (hello feature bit 3)");
}

} // namespace sluice
