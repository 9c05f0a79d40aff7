// Changed-block updates on the sending side (issue 17, docs/protocol.md "Updates by changed
// blocks"): the receiver's BLOCK_SUMS of its old versions, kept until their manifest page is
// acknowledged, then turned into REUSE frames and ranges planned as done.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/wire/codec.hpp"
#include "send/plan/source_tree.hpp"

namespace sluice {

class UpdateSums {
public:
    explicit UpdateSums(uint64_t block_size) : block_size_(block_size) {}
    // The block size the planner uses, named in UPDATE_PARAMS (--block-size, or 1 MiB when
    // records are sealed in user space): the receiver's sums, its cache and our REUSE ranges
    // are in it, and a received block's checksum can stand for one of its sums only then.
    void set_block_size(uint64_t b) { block_size_ = b; }

    // The control reader: the old version of a file of a page not acknowledged yet (the
    // receiver sends them before the page's ack). `known` says whether the id is a file of
    // this transfer; an unknown or repeated id is a protocol error.
    void accept(wire::BlockSums&& s, bool known);

    // For each file of the page with BLOCK_SUMS: the blocks equal to the receiver's old
    // version are encoded into REUSE frames passed to `send` (the receiver copies them from
    // its old version) and appended to `verified`, so the planner treats them as done.
    void take_unchanged(const std::vector<const SourceFile*>& files, std::vector<wire::ByteRange>& verified,
                        const std::function<void(const wire::Bytes&)>& send);

    // Bytes the receiver took from its old versions instead of receiving them.
    uint64_t reused() const { return reused_; }
    // Non-empty if a file could not be mapped to hash it (read through a buffer instead).
    std::string fallback() const {
        return mapped_refused_ ? "update: a file could not be mapped to hash it: hashed through pread (slower)" : "";
    }

private:
    uint64_t block_size_;
    std::mutex mu_; // sums_: the control reader adds, the ack handler takes
    std::unordered_map<uint64_t, wire::BlockSums> sums_;
    uint64_t reused_ = 0;
    bool mapped_refused_ = false;
};

} // namespace sluice
