#pragma once
// The sender's side of OWNER_NAMES (docs/protocol.md, "Owner names"): each user and group id
// the entries carry is named once, in a frame before the first manifest page that uses it,
// instead of in every entry's trailer (a tree has few owners and many entries). At most
// kMaxOwnerNames ids of each kind are named (the receiver's bound); later ones travel as
// numbers alone, which the receiver keeps as numbers. The ids of named-user and named-group
// ACL entries are named the same way (the receiver maps them like owners).
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/wire/codec.hpp"

namespace sluice {

// The local name of a user (group false) or group id; "" where it has none (or one longer than
// the wire's 255 bytes). Looked up once per id per process.
const std::string& owner_name(bool group, uint32_t id);

class OwnerNames {
public:
    // Moves m's names out of its trailer and names its ACLs' ids; the ones of ids not named
    // before wait for flush().
    void take(wire::EntryMeta& m);
    // Appends one OWNER_NAMES frame with the waiting names (none waiting: nothing).
    void flush(wire::Bytes& out);
    // Ids past the bound, sent without a name.
    uint64_t unnamed() const { return unnamed_; }

private:
    void add(bool group, uint32_t id, std::string&& name);

    std::unordered_set<uint64_t> seen_; // group << 32 | id
    std::vector<wire::OwnerName> waiting_;
    uint32_t users_ = 0, groups_ = 0;
    uint64_t unnamed_ = 0;
};

} // namespace sluice
