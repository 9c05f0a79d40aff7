// What a receiver takes from a sender it does not fully trust (RecvOptions::sender_trust,
// recv/store/tree_trust.cpp): TreeMeta::confine filters an entry's metadata before anything
// looks at it, and says each kind it dropped once, with the option that would keep it.
#include <doctest/doctest.h>
#include <unistd.h>

#include <array>

#include "acl_value.hpp"

#include "core/wire/acl_ids.hpp"
#include "recv/store/tree_meta.hpp"

using namespace sluice;
using M = wire::EntryMeta;

namespace {

// owner, owning group, other; a named user 4242 with a mask.
const std::string kPlainAcl = acl({{1, 7, 0xFFFFFFFF}, {4, 5, 0xFFFFFFFF}, {32, 0, 0xFFFFFFFF}});
const std::string kNamedAcl = acl({{1, 7, 0xFFFFFFFF}, {2, 6, 4242}, {4, 5, 0xFFFFFFFF}, {16, 7, 0xFFFFFFFF}, {32, 0, 0xFFFFFFFF}});

M hostile() {
    M m;
    m.flags = M::kHasOwner | M::kHasGroup;
    m.uid = ::geteuid() + 1234; // not the receiver's
    m.gid = ::getegid() + 1234;
    m.xattrs = {{"user.x", "kept"},
                {"security.capability", "cap"},
                {"trusted.x", "t"},
                {"security.selinux", "label"},
                {"system.posix_acl_access", kNamedAcl},
                {"system.posix_acl_default", kPlainAcl}};
    return m;
}

std::vector<std::string> names(const M& m) {
    std::vector<std::string> n;
    for (const auto& [k, v] : m.xattrs) n.push_back(k);
    return n;
}

TreeMeta meta(SenderTrust t) { return TreeMeta(OwnerMap(true, "", ""), 1u << 20, t); }

} // namespace

TEST_CASE("sender trust: full takes everything (sluice recv)") {
    TreeMeta tm = meta(SenderTrust::full);
    M m = hostile();
    tm.confine("f", m);
    CHECK(m.flags == (M::kHasOwner | M::kHasGroup));
    CHECK(m.xattrs.size() == 6);
    CHECK(tm.warnings().list().empty());
}

TEST_CASE("sender trust: none keeps no owners and only user.* attributes and ACLs naming no one") {
    TreeMeta tm = meta(SenderTrust::none);
    M m = hostile();
    tm.confine("d/f", m);
    CHECK(m.flags == 0);
    CHECK(names(m) == std::vector<std::string>{"user.x", "system.posix_acl_default"});
    M again = hostile();
    tm.confine("d/g", again);
    const auto w = tm.warnings();
    CHECK(w.count("owners") == 2);
    CHECK(w.count("groups") == 2);
    CHECK(w.count("file capabilities") == 2);
    CHECK(w.count("trusted.* extended attributes") == 2);
    CHECK(w.count("security.* extended attributes") == 2);
    CHECK(w.count("ACLs naming users or groups") == 2);
    for (const MetadataNotKept& k : w.list()) CHECK(k.first == "d/f");
    // The sender's text: one line per kind, each naming the option that would keep it.
    const std::string text = w.text(4096);
    CHECK(text.find("warning: owners not kept for 2 entries (first: 'd/f'") != std::string::npos);
    CHECK(text.find("--push-keep-privileges") != std::string::npos);
    CHECK(std::count(text.begin(), text.end(), '\n') == 5);
}

TEST_CASE("sender trust: none says nothing of owners that are the receiver's own") {
    TreeMeta tm = meta(SenderTrust::none);
    M m;
    m.flags = M::kHasOwner | M::kHasGroup;
    m.uid = ::geteuid();
    m.gid = ::getegid();
    tm.confine("f", m);
    CHECK(m.flags == 0);
    CHECK(tm.warnings().list().empty());
}

TEST_CASE("sender trust: owners keeps owners and named ACLs, not privileges") {
    TreeMeta tm = meta(SenderTrust::owners);
    M m = hostile();
    tm.confine("f", m);
    CHECK(m.flags == (M::kHasOwner | M::kHasGroup));
    CHECK(names(m) == std::vector<std::string>{"user.x", "system.posix_acl_access", "system.posix_acl_default"});
    CHECK(tm.warnings().count("owners") == 0);
    CHECK(tm.warnings().count("file capabilities") == 1);
}

TEST_CASE("sender trust: the warning text is cut at whole lines and says what it left out") {
    TreeMeta tm = meta(SenderTrust::none);
    M m = hostile();
    tm.confine(std::string(300, 'p'), m);
    const std::string text = tm.warnings().text(700);
    CHECK(text.size() <= 700);
    CHECK(text.find("more kinds not kept (the receiver's log lists them)") != std::string::npos);
}

TEST_CASE("acl_names_someone: named user or group entries, and malformed values") {
    CHECK_FALSE(wire::acl_names_someone(kPlainAcl));
    CHECK(wire::acl_names_someone(kNamedAcl));
    CHECK(wire::acl_names_someone(acl({{8, 5, 7}})));
    CHECK(wire::acl_names_someone(std::string("\x02\x00\x00\x00\x01", 5)));
}
