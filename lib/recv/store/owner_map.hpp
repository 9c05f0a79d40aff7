#pragma once
// Which local user and group a sender's id becomes (issue 17; docs/protocol.md "Owner names"),
// as rsync decides it:
//   1. the first --usermap / --groupmap rule (rsync's FROM:TO,... syntax) matching the sender's
//      id or name,
//   2. else the local id of the sender's name (sent once per id in OWNER_NAMES), where this
//      host knows that name; never for id 0, whose name is not used (rsync's rule),
//   3. else the sender's number.
// With --numeric-ids names are not used: every id is nameless (only numeric, `*` and empty
// FROMs match). Everything the sender sends is bounded (kMaxOwnerNames per kind) and each id
// is resolved once; bytes() says what the tables hold, for the manifest's memory budget.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/wire/protocol.hpp"

namespace sluice {

// One --usermap or --groupmap value. FROM: a name or wildcard pattern (*, ?, [..]) matched
// against the sender's name ("" for a nameless id), a number, or an inclusive range LOW-HIGH;
// TO: a local name (looked up when parsed) or a number. The first matching rule decides.
class IdMapRules {
public:
    IdMapRules() = default;
    // Throws Error(usage) naming the option and the rule that is not FROM:TO or names a TO
    // this host does not know. chown: the rule is --chown's ('*:NAME'), named so in errors.
    IdMapRules(const std::string& spec, bool group, bool chown = false);
    std::optional<uint32_t> match(uint32_t id, const std::string& name) const;
    bool empty() const { return rules_.empty(); }
    void append(const IdMapRules& later) { rules_.insert(rules_.end(), later.rules_.begin(), later.rules_.end()); }

private:
    struct Rule {
        std::optional<std::string> pattern; // a name pattern; else the id range
        uint32_t lo = 0, hi = 0;
        uint32_t to = 0;
    };
    std::vector<Rule> rules_;
};

class OwnerMap {
public:
    // Throws Error(usage) for a bad usermap/groupmap (an empty one maps nothing) or --chown
    // (USER:GROUP, core/session/chown_spec.hpp; "" for none).
    OwnerMap(bool numeric_ids, const std::string& usermap, const std::string& groupmap, const std::string& chown = {});

    // OWNER_NAMES. Throws Error(protocol) for an id named twice, named after a page used it,
    // or more than kMaxOwnerNames ids of one kind.
    void add(const std::vector<wire::OwnerName>& names);
    // The sender's --usermap/--groupmap (TREE_OPTIONS, before any page): their rules come after
    // ours (the first match decides). Throws Error(usage), "the sender's --usermap: ...", for a
    // rule that is not FROM:TO or a TO this host does not know.
    // user_chown / group_chown: that map is the sender's --chown (TREE_OPTIONS bits 3, 4).
    void add_sender_maps(const std::string& usermap, const std::string& groupmap, bool user_chown = false,
                         bool group_chown = false);
    // The receiver's id for the sender's user / group id. trailer_name: a name an entry's
    // metadata trailer carried (senders before OWNER_NAMES): taken as that id's name.
    uid_t user(uint32_t id, const std::string& trailer_name = {});
    gid_t group(uint32_t id, const std::string& trailer_name = {});

    uint64_t bytes() const { return bytes_; }

private:
    struct Kind {
        IdMapRules rules;
        std::unordered_map<uint32_t, std::string> names; // the sender's, by its id
        std::unordered_map<uint32_t, uint32_t> resolved; // sender id -> ours, once used
    };
    void name(Kind& k, bool group, uint32_t id, const std::string& name, bool again_ok);
    uint32_t resolve(Kind& k, bool group, uint32_t id, const std::string& trailer_name);

    bool numeric_;
    Kind users_, groups_;
    uint64_t bytes_ = 0;
};

} // namespace sluice
