// --dry-run's frames and the sender's checks of them (docs/protocol.md "Dry run"): the
// receiver's answers are network input, so counts, ids and lengths are refused past their bounds.
#include <doctest/doctest.h>

#include "core/wire/codec.hpp"
#include "send/session/dry_run_list.hpp"

using namespace sluice;
using namespace sluice::wire;

namespace {

Span payload_of(const Bytes& frame) { return Span(frame).subspan(kFrameHeaderBytes); }

ManifestEntry sent(uint64_t id, std::string path, EntryKind kind, uint64_t size = 0, std::string target = "") {
    ManifestEntry e;
    e.file_id = id;
    e.path = std::move(path);
    e.kind = kind;
    e.size = size;
    e.link_target = std::move(target);
    return e;
}

} // namespace

TEST_CASE("dry run frames round trip") {
    Bytes out;
    encode_dry_run_items(out, {{.file_id = 3, .changes = DryRunItem::kSize | DryRunItem::kTime}, {.file_id = 9, .changes = 1}});
    std::vector<DryRunItem> items = decode_dry_run_items(payload_of(out));
    REQUIRE(items.size() == 2);
    CHECK(items[0].file_id == 3);
    CHECK(items[0].changes == (DryRunItem::kSize | DryRunItem::kTime));
    CHECK(items[1].file_id == 9);
    Bytes d;
    encode_dry_run_deleted(d, DryRunDeleted{.paths = {{.path = "a/b", .is_dir = false}, {.path = "a", .is_dir = true}}});
    DryRunDeleted back = decode_dry_run_deleted(payload_of(d));
    REQUIRE(back.paths.size() == 2);
    CHECK(back.paths[0].path == "a/b");
    CHECK(back.paths[1].is_dir);
}

TEST_CASE("dry run frames refuse what a frame cannot hold, unknown bits and disorder") {
    Bytes out;
    encode_dry_run_items(out, {{.file_id = 5, .changes = 1}, {.file_id = 5, .changes = 1}});
    CHECK_THROWS_WITH(decode_dry_run_items(payload_of(out)), "DRY_RUN_ITEMS: file id 5 is not after 5");
    out.clear();
    encode_dry_run_items(out, {{.file_id = 1, .changes = 0}});
    CHECK_THROWS_WITH(decode_dry_run_items(payload_of(out)), doctest::Contains("change bits 0"));
    out.clear();
    encode_dry_run_items(out, {});
    CHECK_THROWS_WITH(decode_dry_run_items(payload_of(out)), doctest::Contains("0 items announced"));
    Bytes d;
    encode_dry_run_deleted(d, DryRunDeleted{.paths = {{.path = "x", .is_dir = false}}});
    d[kFrameHeaderBytes] = 0xff; // count 255 in a frame with one path
    CHECK_THROWS_WITH(decode_dry_run_deleted(payload_of(d)), doctest::Contains("255 paths announced"));
}

TEST_CASE("the sender turns items into rsync's letters and checks ids") {
    DryRunList l;
    l.add(sent(0, "src", EntryKind::directory));
    l.add(sent(1, "src/f", EntryKind::file, 100));
    l.add(sent(2, "src/l", EntryKind::symlink, 0, "f"));
    l.add(sent(3, "src/h", EntryKind::hard_link, 0, "src/f"));
    l.on_items({{.file_id = 1, .changes = DryRunItem::kSize | DryRunItem::kTime}, {.file_id = 2, .changes = DryRunItem::kNew}});
    CHECK_THROWS_WITH(l.on_items({{.file_id = 2, .changes = 1}}), doctest::Contains("listed already or out of order"));
    CHECK_THROWS_WITH(l.on_items({{.file_id = 4, .changes = 1}}), doctest::Contains("an entry that was not sent"));
    l.on_items({{.file_id = 3, .changes = DryRunItem::kNew}});
    std::vector<ItemizedChange> c = l.take();
    REQUIRE(c.size() == 3);
    CHECK(c[0].item == ">f.st......");
    CHECK(c[0].bytes == 100);
    CHECK(c[1].item == "cL+++++++++");
    CHECK(c[1].target == "f");
    CHECK(c[2].item == "hf+++++++++");
    CHECK(DryRunList::letters(EntryKind::file, DryRunItem::kPerms | DryRunItem::kOwner) == ".f...po....");
    CHECK(DryRunList::letters(EntryKind::directory, DryRunItem::kTime) == ".d..t......");
    CHECK(DryRunList::letters(EntryKind::file, DryRunItem::kAcl | DryRunItem::kXattrs) == ".f.......ax");
    CHECK(DryRunList::letters(EntryKind::symlink, DryRunItem::kXattrs) == ".L........x");
}

TEST_CASE("the sender keeps at most kMaxDryRunDeleted deletion paths") {
    DryRunList l;
    DryRunDeleted d;
    for (uint64_t i = 0; i < kMaxDryRunDeleted; ++i) d.paths.push_back({.path = "p", .is_dir = false});
    l.on_deleted(std::move(d));
    DryRunDeleted one{.paths = {{.path = "q", .is_dir = false}}};
    CHECK_THROWS_WITH(l.on_deleted(std::move(one)), doctest::Contains("DRY_RUN_DELETED lists more than 1048576 paths"));
}
