#include "send/plan/owner_names.hpp"

#include <utility>

namespace sluice {

void OwnerNames::add(bool group, uint32_t id, std::string&& name) {
    if (name.empty()) return; // no name here (or id 0, never named): the number alone
    if (!seen_.insert((uint64_t{group} << 32) | id).second) return;
    uint32_t& named = group ? groups_ : users_;
    if (named == wire::kMaxOwnerNames) {
        ++unnamed_;
        return;
    }
    ++named;
    waiting_.push_back(wire::OwnerName{.group = group, .id = id, .name = std::move(name)});
}

void OwnerNames::take(wire::EntryMeta& m) {
    if (m.flags & wire::EntryMeta::kHasOwner) add(false, m.uid, std::move(m.user));
    if (m.flags & wire::EntryMeta::kHasGroup) add(true, m.gid, std::move(m.group));
    m.user.clear();
    m.group.clear();
}

void OwnerNames::flush(wire::Bytes& out) {
    if (waiting_.empty()) return;
    wire::encode_owner_names(out, waiting_);
    waiting_.clear();
}

} // namespace sluice
