// Owners by name (docs/protocol.md "Owner names"): OWNER_NAMES is network input (kinds,
// lengths, counts refused past their bounds), and OwnerMap decides each id as rsync does:
// --usermap/--groupmap first, then the name where this host knows it, else the number.
#include <doctest/doctest.h>

#include <array>

#include "acl_value.hpp"

#include "core/session/chown_spec.hpp"
#include "core/wire/acl_ids.hpp"
#include "core/wire/codec.hpp"
#include "recv/store/owner_map.hpp"
#include "sluice/error.hpp"

using namespace sluice;
using namespace sluice::wire;

namespace {

Span payload_of(const Bytes& frame) { return Span(frame).subspan(kFrameHeaderBytes); }

std::string error_of(auto fn) {
    try {
        fn();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

constexpr uint32_t kUndef = 0xFFFFFFFF;

} // namespace

TEST_CASE("OWNER_NAMES round trips and refuses what a frame cannot be") {
    Bytes out;
    encode_owner_names(out, {{.group = false, .id = 7, .name = "alice"}, {.group = true, .id = 9, .name = "staff"}});
    std::vector<OwnerName> n = decode_owner_names(payload_of(out));
    REQUIRE(n.size() == 2);
    CHECK((!n[0].group && n[0].id == 7 && n[0].name == "alice"));
    CHECK((n[1].group && n[1].id == 9 && n[1].name == "staff"));

    Bytes bad = out;
    bad[kFrameHeaderBytes] = 0xff; // the count: more than the frame holds
    CHECK(error_of([&] { decode_owner_names(payload_of(bad)); }).find("names announced in a frame of") != std::string::npos);
    bad = out;
    bad[kFrameHeaderBytes + 4] = 3; // the first name's kind
    CHECK(error_of([&] { decode_owner_names(payload_of(bad)); }).find("unknown kind 3 for id 7") != std::string::npos);
    bad = out;
    bad[kFrameHeaderBytes + 4 + 8 + 2] = '\0'; // inside "alice"
    CHECK(error_of([&] { decode_owner_names(payload_of(bad)); }).find("user id 7 has a NUL byte") != std::string::npos);
}

TEST_CASE("owners map by rule, then by name, then by number") {
    // daemon is uid 1 and bin uid 2 on Debian (the test image); nobody 65534.
    OwnerMap m(false, "daemon:bin,4000-4099:nobody,x*:5,:77", "*:3");
    m.add({{.group = false, .id = 500, .name = "daemon"},
           {.group = false, .id = 501, .name = "bin"},
           {.group = false, .id = 502, .name = "xyz"},
           {.group = false, .id = 4050, .name = "whoever"},
           {.group = false, .id = 0, .name = "daemon"}});
    CHECK(m.user(500) == 2);   // the name rule
    CHECK(m.user(501) == 2);   // no rule: bin by name
    CHECK(m.user(502) == 5);   // a wildcard
    CHECK(m.user(4050) == 65534); // a range, before the name
    CHECK(m.user(9999) == 77); // nameless: the empty FROM
    CHECK(m.user(0) == 77);    // id 0 is never mapped by name: nameless
    CHECK(m.group(12345) == 3);
    const uint64_t b = m.bytes();
    CHECK(m.user(500) == 2); // resolved once
    CHECK(m.bytes() == b);

    OwnerMap plain(false, "", "");
    plain.add({{.group = false, .id = 600, .name = "no-such-user-anywhere"}, {.group = true, .id = 601, .name = "bin"}});
    CHECK(plain.user(600) == 600); // unknown here: the number
    CHECK(plain.group(601) == 2);

    OwnerMap numeric(true, "daemon:9,1:8", "");
    numeric.add({{.group = false, .id = 1, .name = "daemon"}});
    CHECK(numeric.user(1) == 8); // names unused: only the numeric rule matches
}

TEST_CASE("the sender's names are bounded and given once") {
    OwnerMap m(false, "", "");
    m.add({{.group = false, .id = 1, .name = "a"}});
    CHECK(error_of([&] { m.add({{.group = false, .id = 1, .name = "a"}}); }).find("names user id 1 twice") != std::string::npos);
    CHECK(m.user(2) == 2);
    CHECK(error_of([&] { m.add({{.group = false, .id = 2, .name = "b"}}); }).find("after a manifest page used it") !=
          std::string::npos);
    CHECK(m.user(3, "c") == 3); // a trailer's name (an older sender), again on the next entry
    CHECK(m.user(3, "c") == 3);
    CHECK(error_of([&] { m.user(3, "d"); }).find("names user id 3 twice") != std::string::npos);
    std::vector<OwnerName> many;
    for (uint32_t i = 0; i <= kMaxOwnerNames; ++i) many.push_back({.group = true, .id = 100000 + i, .name = "g"});
    CHECK(error_of([&] { m.add(many); }).find("more than 65536 group ids") != std::string::npos);
}

TEST_CASE("usermap and groupmap values are checked when parsed") {
    CHECK(error_of([] { IdMapRules("daemon", false); }) == "--usermap: 'daemon' is not FROM:TO");
    CHECK(error_of([] { IdMapRules("a:1,5-2:1", true); }).find("'5-2:1' is a range whose low end") != std::string::npos);
    CHECK(error_of([] { IdMapRules("a:no-such-user-anywhere", false); }).find("not a user on this host") != std::string::npos);
    CHECK(error_of([] { IdMapRules("a:4294967295", false); }).find("not a user on this host") != std::string::npos);
    CHECK(error_of([] { IdMapRules("0-10:bin", false); }).empty());
}

TEST_CASE("the sender's maps travel in TREE_OPTIONS and come after the receiver's own") {
    Bytes out;
    encode_tree_options(out, TreeOptionsFrame{.flags = TreeOptionsFrame::kOwnerMaps, .rules = {"- *.o"},
                                              .usermap = "daemon:bin", .groupmap = ":3"});
    TreeOptionsFrame t = decode_tree_options(payload_of(out));
    CHECK((t.flags == TreeOptionsFrame::kOwnerMaps && t.rules.size() == 1 && t.usermap == "daemon:bin" && t.groupmap == ":3"));
    Bytes bad = out;
    bad[bad.size() - 1] = '\0'; // inside the group map
    CHECK(error_of([&] { decode_tree_options(payload_of(bad)); }).find("an owner map with a NUL byte") != std::string::npos);

    OwnerMap m(false, "daemon:sys", "");
    m.add_sender_maps("daemon:nobody,bin:daemon", "*:3");
    m.add({{.group = false, .id = 500, .name = "daemon"}, {.group = false, .id = 501, .name = "bin"}});
    CHECK(m.user(500) == 3);  // the receiver's rule first (sys)
    CHECK(m.user(501) == 1);  // then the sender's (daemon)
    CHECK(m.group(77) == 3);
    CHECK(error_of([&] { m.add_sender_maps("x:no-such-user-anywhere", ""); }) ==
          "the sender's --usermap: 'x:no-such-user-anywhere' maps to 'no-such-user-anywhere', which is not a user on this host");
}

TEST_CASE("ACL ids are rewritten, sorted as the kernel keeps them, and ids that meet are merged") {
    std::string v = acl({{1, 6, kUndef}, {2, 4, 500}, {2, 2, 400}, {4, 4, kUndef}, {8, 1, 700}, {0x10, 7, kUndef},
                         {0x20, 4, kUndef}});
    std::vector<std::pair<bool, uint32_t>> seen;
    wire::map_acl_ids(v, [&](bool group, uint32_t id) {
        seen.emplace_back(group, id);
        return group ? 70u : (id == 500 ? 40u : 30u);
    });
    CHECK(seen == std::vector<std::pair<bool, uint32_t>>{{false, 500}, {false, 400}, {true, 700}});
    CHECK(wire::normalize_acl(v) == 0);
    CHECK(v == acl({{1, 6, kUndef}, {2, 2, 30}, {2, 4, 40}, {4, 4, kUndef}, {8, 1, 70}, {0x10, 7, kUndef}, {0x20, 4, kUndef}}));
    std::string met = acl({{1, 6, kUndef}, {2, 4, 9}, {2, 2, 9}, {4, 4, kUndef}, {0x10, 7, kUndef}, {0x20, 0, kUndef}});
    CHECK(wire::normalize_acl(met) == 1);
    CHECK(met == acl({{1, 6, kUndef}, {2, 6, 9}, {4, 4, kUndef}, {0x10, 7, kUndef}, {0x20, 0, kUndef}}));
    std::string odd = "\x02\0\0\0\x02\0"; // not whole entries: left alone (the decoder refuses these)
    const std::string before = odd;
    wire::map_acl_ids(odd, [](bool, uint32_t) { return 1u; });
    CHECK(wire::normalize_acl(odd) == 0);
    CHECK(odd == before);
}

TEST_CASE("--chown is the maps '*:USER' and '*:GROUP', and refuses what rsync refuses") {
    ChownMaps m = chown_maps("bin:daemon", "", "");
    CHECK(m.usermap == "*:bin");
    CHECK(m.groupmap == "*:daemon");
    m = chown_maps(":7", "x:y", "");
    CHECK(m.usermap == "x:y");
    CHECK(m.groupmap == "*:7");
    m = chown_maps("bin", "", "a:b");
    CHECK(m.groupmap == "a:b");
    auto error_of = [](const char* spec, const char* user, const char* group) {
        try {
            chown_maps(spec, user, group);
        } catch (const Error& e) {
            CHECK(e.code() == ErrorCode::usage);
            return std::string(e.what());
        }
        return std::string();
    };
    CHECK(error_of("", "", "").find("is not USER, USER:GROUP or :GROUP") != std::string::npos);
    CHECK(error_of(":", "", "").find("is not USER") != std::string::npos);
    CHECK(error_of("a:b:c", "", "").find("is not USER") != std::string::npos);
    CHECK(error_of("a", "x:y", "").find("--usermap cannot be given too") != std::string::npos);
    CHECK(error_of(":g", "", "x:y").find("--groupmap cannot be given too") != std::string::npos);
}
