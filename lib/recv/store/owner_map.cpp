#include "recv/store/owner_map.hpp"

#include <fnmatch.h>
#include <grp.h>
#include <pwd.h>

#include <charconv>
#include <string_view>

#include "core/session/chown_spec.hpp"
#include "sluice/error.hpp"

namespace sluice {

namespace {

std::optional<uint32_t> number(std::string_view s) {
    uint32_t v = 0;
    if (s.empty() || s.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || end != s.data() + s.size() || v == UINT32_MAX) return std::nullopt; // -1 means "unchanged" to chown
    return v;
}

std::optional<uint32_t> local_id(bool group, const std::string& name) {
    std::vector<char> buf(16384);
    if (group) {
        struct group g {}, *res = nullptr;
        if (::getgrnam_r(name.c_str(), &g, buf.data(), buf.size(), &res) == 0 && res) return res->gr_gid;
    } else {
        struct passwd p {}, *res = nullptr;
        if (::getpwnam_r(name.c_str(), &p, buf.data(), buf.size(), &res) == 0 && res) return res->pw_uid;
    }
    return std::nullopt;
}

// The map's memory per name or resolved id: the hash node and the string's heap.
constexpr uint64_t kNodeBytes = 64;

} // namespace

IdMapRules::IdMapRules(const std::string& spec, bool group, bool chown) {
    const std::string opt = chown ? "--chown" : group ? "--groupmap" : "--usermap";
    const char* what = group ? "group" : "user";
    std::string_view rest = spec;
    while (!rest.empty() || rules_.empty()) {
        const size_t comma = rest.find(',');
        const std::string_view item = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
        const size_t colon = item.rfind(':');
        auto fail = [&](const std::string& why) {
            throw Error(ErrorCode::usage, opt + ": '" + std::string(item) + "' " + why);
        };
        if (colon == std::string_view::npos) fail("is not FROM:TO");
        const std::string_view from = item.substr(0, colon), to = item.substr(colon + 1);
        Rule r;
        if (to.empty()) fail("has no TO");
        if (auto n = number(to)) {
            r.to = *n;
        } else if (auto id = local_id(group, std::string(to))) {
            r.to = *id;
        } else {
            if (chown) throw Error(ErrorCode::usage, opt + ": '" + std::string(to) + "' is not a " + what + " on this host");
            fail(std::string("maps to '") + std::string(to) + "', which is not a " + what + " on this host");
        }
        const size_t dash = from.find('-');
        if (auto n = number(from)) {
            r.lo = r.hi = *n;
        } else if (dash != std::string_view::npos && number(from.substr(0, dash)) && number(from.substr(dash + 1))) {
            r.lo = *number(from.substr(0, dash));
            r.hi = *number(from.substr(dash + 1));
            if (r.lo > r.hi) fail("is a range whose low end is above its high end");
        } else {
            r.pattern = std::string(from); // a name, a wildcard, or "" (nameless ids)
        }
        rules_.push_back(std::move(r));
        if (comma == std::string_view::npos) break;
    }
}

std::optional<uint32_t> IdMapRules::match(uint32_t id, const std::string& name) const {
    for (const Rule& r : rules_) {
        if (r.pattern ? ::fnmatch(r.pattern->c_str(), name.c_str(), 0) == 0 : (id >= r.lo && id <= r.hi)) return r.to;
    }
    return std::nullopt;
}

OwnerMap::OwnerMap(bool numeric_ids, const std::string& usermap, const std::string& groupmap, const std::string& chown)
    : numeric_(numeric_ids) {
    const ChownMaps maps = chown.empty() ? ChownMaps{usermap, groupmap} : chown_maps(chown, usermap, groupmap);
    if (!maps.usermap.empty()) users_.rules = IdMapRules(maps.usermap, false, maps.usermap != usermap);
    if (!maps.groupmap.empty()) groups_.rules = IdMapRules(maps.groupmap, true, maps.groupmap != groupmap);
}

void OwnerMap::add_sender_maps(const std::string& usermap, const std::string& groupmap, bool user_chown, bool group_chown) {
    try {
        if (!usermap.empty()) users_.rules.append(IdMapRules(usermap, false, user_chown));
        if (!groupmap.empty()) groups_.rules.append(IdMapRules(groupmap, true, group_chown));
    } catch (const Error& e) {
        throw Error(ErrorCode::usage, std::string("the sender's ") + e.what());
    }
}

void OwnerMap::name(Kind& k, bool group, uint32_t id, const std::string& name, bool again_ok) {
    const char* what = group ? "group" : "user";
    auto [it, fresh] = k.names.try_emplace(id);
    if (!fresh) {
        if (again_ok && it->second == name) return;
        throw Error(ErrorCode::protocol, std::string("the sender names ") + what + " id " + std::to_string(id) + " twice");
    }
    if (k.resolved.contains(id)) {
        k.names.erase(it);
        throw Error(ErrorCode::protocol, std::string("OWNER_NAMES names ") + what + " id " + std::to_string(id) +
                                             " after a manifest page used it");
    }
    if (k.names.size() > wire::kMaxOwnerNames) {
        k.names.erase(it);
        throw Error(ErrorCode::protocol, std::string("the sender names more than ") + std::to_string(wire::kMaxOwnerNames) +
                                             " " + what + " ids");
    }
    it->second = name;
    bytes_ += kNodeBytes + name.capacity();
}

void OwnerMap::add(const std::vector<wire::OwnerName>& names) {
    for (const wire::OwnerName& n : names) name(n.group ? groups_ : users_, n.group, n.id, n.name, false);
}

uint32_t OwnerMap::resolve(Kind& k, bool group, uint32_t id, const std::string& trailer_name) {
    if (!trailer_name.empty()) name(k, group, id, trailer_name, true);
    if (auto it = k.resolved.find(id); it != k.resolved.end()) return it->second;
    std::string sender_name;
    if (!numeric_ && id != 0)
        if (auto it = k.names.find(id); it != k.names.end()) sender_name = it->second;
    uint32_t ours = id;
    if (auto to = k.rules.match(id, sender_name)) {
        ours = *to;
    } else if (!sender_name.empty()) {
        ours = local_id(group, sender_name).value_or(id);
    }
    k.resolved.emplace(id, ours);
    bytes_ += kNodeBytes;
    return ours;
}

uid_t OwnerMap::user(uint32_t id, const std::string& trailer_name) { return resolve(users_, false, id, trailer_name); }
gid_t OwnerMap::group(uint32_t id, const std::string& trailer_name) { return resolve(groups_, true, id, trailer_name); }

} // namespace sluice
