#include "send/session/dry_run_list.hpp"

#include <utility>

#include "sluice/error.hpp"

namespace sluice {

namespace {
using Item = wire::DryRunItem;
using K = wire::EntryKind;
} // namespace

void DryRunList::add(const wire::ManifestEntry& e) {
    std::lock_guard lk(mu_);
    if (e.file_id >= sent_.size()) sent_.resize(e.file_id + 1);
    sent_[e.file_id] = Sent{.path = e.path, .target = e.link_target, .kind = e.kind, .size = e.size, .present = true};
}

std::string DryRunList::letters(K k, uint16_t c) {
    char x = 'f';
    switch (k) {
    case K::directory: x = 'd'; break;
    case K::symlink: x = 'L'; break;
    case K::char_device:
    case K::block_device: x = 'D'; break;
    case K::fifo:
    case K::socket: x = 'S'; break;
    default: break;
    }
    char y = '.';
    if (k == K::hard_link)
        y = 'h';
    else if (k == K::file && (c & (Item::kNew | Item::kSize | Item::kTime)))
        y = '>';
    else if (c & (Item::kNew | Item::kContent))
        y = 'c';
    std::string s{y, x};
    if (c & Item::kNew) return s + "+++++++++";
    s += (c & Item::kContent) ? 'c' : '.';
    s += (c & Item::kSize) ? 's' : '.';
    s += (c & Item::kTime) ? 't' : '.';
    s += (c & Item::kPerms) ? 'p' : '.';
    s += (c & Item::kOwner) ? 'o' : '.';
    s += (c & Item::kGroup) ? 'g' : '.';
    s += '.'; // u: access and creation times are not kept
    s += (c & Item::kAcl) ? 'a' : '.';
    s += (c & Item::kXattrs) ? 'x' : '.';
    return s;
}

void DryRunList::on_items(const std::vector<Item>& items) {
    std::lock_guard lk(mu_);
    for (const Item& i : items) {
        if (i.file_id < next_id_ || i.file_id >= sent_.size() || !sent_[i.file_id].present)
            throw Error(ErrorCode::protocol, "DRY_RUN_ITEMS names file id " + std::to_string(i.file_id) +
                                                 (i.file_id < next_id_ ? ", listed already or out of order"
                                                                       : ", an entry that was not sent"));
        next_id_ = i.file_id + 1;
        const Sent& s = sent_[i.file_id];
        ItemizedChange c{.item = letters(s.kind, i.changes), .path = s.path};
        if (s.kind == K::symlink || s.kind == K::hard_link) c.target = s.target;
        if (c.item[0] == '>') c.bytes = s.size;
        changes_.push_back(std::move(c));
    }
}

void DryRunList::on_deleted(wire::DryRunDeleted&& d) {
    std::lock_guard lk(mu_);
    for (wire::DryRunDeleted::Path& p : d.paths) {
        deleted_bytes_ += p.path.size() + 1;
        if (deleted_.size() >= wire::kMaxDryRunDeleted || deleted_bytes_ > wire::kMaxDryRunDeletedBytes)
            throw Error(ErrorCode::protocol, "DRY_RUN_DELETED lists more than " + std::to_string(wire::kMaxDryRunDeleted) +
                                                 " paths or " + std::to_string(wire::kMaxDryRunDeletedBytes >> 20) +
                                                 " MiB (the limit a sender keeps)");
        deleted_.push_back(ItemizedChange{.item = "*deleting", .path = p.is_dir ? std::move(p.path) + "/" : std::move(p.path)});
    }
}

std::vector<ItemizedChange> DryRunList::take() {
    std::lock_guard lk(mu_);
    std::vector<ItemizedChange> out = std::move(changes_);
    for (ItemizedChange& c : deleted_) out.push_back(std::move(c));
    deleted_.clear();
    return out;
}

} // namespace sluice
