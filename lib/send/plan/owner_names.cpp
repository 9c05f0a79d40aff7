#include "send/plan/owner_names.hpp"

#include <grp.h>
#include <pwd.h>

#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/wire/acl_ids.hpp"

namespace sluice {

// Names of ids, looked up once each: a tree has few owners and NSS lookups are not cheap.
// A walk runs on one thread, but the cache is shared by walks: guarded.
const std::string& owner_name(bool group, uint32_t id) {
    static std::mutex mu;
    static std::unordered_map<uint64_t, std::string> cache;
    std::lock_guard lk(mu);
    const uint64_t key = (uint64_t{group} << 32) | id;
    if (auto it = cache.find(key); it != cache.end()) return it->second;
    std::string name;
    std::vector<char> buf(16384);
    if (group) {
        struct group g {}, *res = nullptr;
        if (::getgrgid_r(id, &g, buf.data(), buf.size(), &res) == 0 && res) name = g.gr_name;
    } else {
        struct passwd p {}, *res = nullptr;
        if (::getpwuid_r(id, &p, buf.data(), buf.size(), &res) == 0 && res) name = p.pw_name;
    }
    if (name.size() > 255) name.clear(); // the wire's limit; the id still travels
    return cache.emplace(key, std::move(name)).first->second;
}

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
    // Named-user and named-group ACL entries are mapped by name on the receiver like owners
    // (rsync's rule, id 0 included: never by name).
    for (const auto& [key, value] : m.xattrs) {
        if (!wire::is_acl_name(key)) continue;
        std::string copy = value; // map_acl_ids rewrites; here the ids are only read
        wire::map_acl_ids(copy, [&](bool group, uint32_t id) {
            if (id != 0) add(group, id, std::string(owner_name(group, id)));
            return id;
        });
    }
}

void OwnerNames::flush(wire::Bytes& out) {
    if (waiting_.empty()) return;
    wire::encode_owner_names(out, waiting_);
    waiting_.clear();
}

} // namespace sluice
