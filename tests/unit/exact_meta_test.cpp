// Exact attribute lists (docs/protocol.md "Exact attributes"): the sender says its lists are
// complete only to a receiver offering ServerHello bit 8, and only for what it sends; the
// receiver removes only in those namespaces, never security.selinux or other ones.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/xattr.h>

#include <fstream>
#include <optional>

#include "core/io/unique_fd.hpp"
#include "core/session/session_log.hpp"
#include "core/wire/codec.hpp"
#include "recv/store/stale_xattrs.hpp"
#include "send/session/receiver_fit.hpp"
#include "temp_dir.hpp"

using namespace sluice;
using namespace sluice::wire;
using T = TreeOptionsFrame;

namespace {

SessionLog quiet_log(std::vector<std::string>& lines) {
    return SessionLog([&lines](std::string_view l) { lines.emplace_back(l); }, true);
}

std::optional<uint32_t> sent_flags(uint16_t features, const TreeOptions& tree) {
    std::vector<std::string> lines;
    SessionLog log = quiet_log(lines);
    ReceiverFit fit(features, log, nullptr);
    auto out = fit.tree_options(tree, false, false, "peer");
    if (!out) return std::nullopt;
    return decode_tree_options(Span(*out).subspan(kFrameHeaderBytes)).flags;
}

} // namespace

TEST_CASE("exact lists are said only to a receiver offering hello bit 8, for what is sent") {
    TreeOptions tree;
    // An older receiver (tree metadata, no bit 8): no TREE_OPTIONS at all, as before.
    CHECK_FALSE(sent_flags(kFeatureTreeMeta, tree).has_value());
    CHECK(ReceiverFit::exact_flags(kFeatureTreeMeta, tree, true) == 0);
    CHECK(ReceiverFit::exact_flags(kFeatureExactMeta, tree, true) == 0); // no tree metadata: nothing sent
    // A receiver offering it: the flags alone.
    auto f = sent_flags(kFeatureTreeMeta | kFeatureExactMeta, tree);
    REQUIRE(f.has_value());
    CHECK((*f & T::kExactXattrs) != 0);
    CHECK((*f & T::kExactAcls) != 0);
    CHECK((*f & ~T::kExactMask) == 0);
    CHECK(ReceiverFit::exact_flags(kFeatureTreeMeta | kFeatureExactMeta, tree, true) == T::kExactMask);
    CHECK(ReceiverFit::exact_flags(kFeatureTreeMeta | kFeatureExactMeta, tree, false) == (T::kExactXattrs | T::kExactAcls));
    tree.xattrs = false; // --no-xattrs: the receiver's attributes are not the sender's to remove
    CHECK(ReceiverFit::exact_flags(kFeatureTreeMeta | kFeatureExactMeta, tree, true) == T::kExactAcls);
    tree.acls = false;
    CHECK_FALSE(sent_flags(kFeatureTreeMeta | kFeatureExactMeta, tree).has_value());
}

TEST_CASE("the older-receiver fallback is said in -v") {
    std::vector<std::string> lines;
    SessionLog log = quiet_log(lines);
    ReceiverFit fit(kFeatureTreeMeta, log, nullptr);
    TreeOptions tree;
    fit.fit_tree(tree, false, "host:1");
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find("not removed at host:1") != std::string::npos);
}

TEST_CASE("TREE_OPTIONS carries the exact flags; a receiver refuses bits past them") {
    Bytes out;
    encode_tree_options(out, TreeOptionsFrame{.flags = T::kExactXattrs | T::kExactAcls});
    CHECK(decode_tree_options(Span(out).subspan(kFrameHeaderBytes)).flags == (T::kExactXattrs | T::kExactAcls));
    Bytes bad;
    encode_tree_options(bad, TreeOptionsFrame{.flags = 256});
    CHECK_THROWS_AS(decode_tree_options(Span(bad).subspan(kFrameHeaderBytes)), Error);
}

TEST_CASE("stale attributes: only the covered namespaces the sender's list lacks") {
    StaleXattrs s;
    CHECK_FALSE(s.covered("user.a"));
    s.set_exact(T::kExactXattrs | T::kExactAcls);
    CHECK(s.covered("user.a"));
    CHECK(s.covered("security.capability"));
    CHECK(s.covered("system.posix_acl_access"));
    CHECK(s.covered("system.posix_acl_default"));
    CHECK_FALSE(s.covered("trusted.a")); // the sender could not read them: says nothing of them
    CHECK_FALSE(s.covered("security.selinux"));
    CHECK_FALSE(s.covered("system.nfs4_acl"));
    s.set_exact(T::kExactTrusted);
    CHECK(s.covered("trusted.a"));
    CHECK_FALSE(s.covered("user.a"));

    unit_test::TempDir dir;
    const std::string file = (dir.path / "f").string();
    std::ofstream(file) << "x";
    if (::setxattr(file.c_str(), "user.keep", "1", 1, 0) != 0 || ::setxattr(file.c_str(), "user.gone", "2", 1, 0) != 0) {
        MESSAGE("no user attributes on /tmp here: the listing part is not checked");
        return;
    }
    s.set_exact(T::kExactXattrs);
    std::vector<std::string> stale;
    REQUIRE(s.find(-1, nullptr, file, false, {{"user.keep", "1"}}, stale));
    REQUIRE(stale.size() == 1);
    CHECK(stale[0] == "user.gone");
    REQUIRE(s.find(-1, nullptr, file, true, {{"user.keep", "1"}, {"user.gone", "2"}}, stale));
    CHECK(stale.empty());
    {
        // By name in its directory (listxattrat), as the receiver lists an unchanged file.
        UniqueFd d(::open(dir.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
        REQUIRE(s.find(d.get(), "f", "/nonexistent", false, {{"user.keep", "1"}}, stale));
        REQUIRE(stale.size() == 1);
        CHECK(stale[0] == "user.gone");
    }
    s.set_exact(T::kExactAcls); // the user. names are not covered: nothing to remove
    REQUIRE(s.find(-1, nullptr, file, false, {}, stale));
    CHECK(stale.empty());
}
