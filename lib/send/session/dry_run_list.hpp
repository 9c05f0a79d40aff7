#pragma once
// --dry-run at the sender (docs/protocol.md "Dry run"): the entries it sent, and the receiver's
// answers about them (DRY_RUN_ITEMS, by file id) and about what it would delete
// (DRY_RUN_DELETED), turned into rsync's --itemize-changes lines (Stats::changes). The
// receiver's answers are network input: ids must name entries sent, in order, each once; the
// deletion list is bounded (wire::kMaxDryRunDeleted paths, kMaxDryRunDeletedBytes); anything
// else is a protocol error naming the value.
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/wire/protocol.hpp"
#include "sluice/stats.hpp"

namespace sluice {

class DryRunList {
public:
    // The walk's thread, as each entry goes into a page (before the page is sent).
    void add(const wire::ManifestEntry& e);
    // The control reader.
    void on_items(const std::vector<wire::DryRunItem>& items);
    void on_deleted(wire::DryRunDeleted&& d);
    // Once the reader has ended: the lines, entries in id order then deletions.
    std::vector<ItemizedChange> take();

    // rsync's 11 letters for a change of an entry of kind k (wire::DryRunItem bits).
    static std::string letters(wire::EntryKind k, uint16_t changes);

private:
    struct Sent {
        std::string path, target;
        wire::EntryKind kind = wire::EntryKind::file;
        uint64_t size = 0;
        bool present = false;
    };
    std::mutex mu_;
    std::vector<Sent> sent_; // by file id
    std::vector<ItemizedChange> changes_, deleted_;
    uint64_t next_id_ = 0; // items must name this id or a later one
    uint64_t deleted_bytes_ = 0;
};

} // namespace sluice
