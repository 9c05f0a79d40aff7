#pragma once
// The file table's index of the paths it holds, for "listed twice" (file_table.hpp): an
// open-addressing hash set (linear probing) of pointers to the entries' path strings, each
// slot with its path's XXH3, grown at half full. Registering a new path costs one hash and,
// nearly always, one slot read; the node-based std::unordered_set it replaces cost a
// division, a bucket, a node allocation and, on every collision, the other path's text
// (~5% of a receiver's CPU in a no-change update of 100k files, issue 17).
// The strings must stay where they are (and unchanged) while they are in the set.
#include <xxhash.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sluice {

class PathIndex {
public:
    // At most this many bytes per path held: slots of 16 bytes, at most 4 per path (the set
    // is between a quarter and half full).
    static constexpr uint64_t kBytesPerPath = 64;

    // False, and nothing inserted, if a path equal to *p is there already.
    bool insert(const std::string* p) {
        if ((count_ + 1) * 2 > slots_.size()) grow();
        const uint64_t h = hash(*p);
        for (size_t i = h & mask_;; i = (i + 1) & mask_) {
            Slot& s = slots_[i];
            if (!s.path) {
                s = {h, p};
                ++count_;
                return true;
            }
            if (s.hash == h && *s.path == *p) return false;
        }
    }

    bool contains(std::string_view p) const {
        if (slots_.empty()) return false;
        const uint64_t h = hash(p);
        for (size_t i = h & mask_;; i = (i + 1) & mask_) {
            const Slot& s = slots_[i];
            if (!s.path) return false;
            if (s.hash == h && *s.path == p) return true;
        }
    }

    // Removes the path equal to p, if there.
    void erase(std::string_view p) {
        if (slots_.empty()) return;
        const uint64_t h = hash(p);
        size_t i = h & mask_;
        for (;; i = (i + 1) & mask_) {
            if (!slots_[i].path) return;
            if (slots_[i].hash == h && *slots_[i].path == p) break;
        }
        // Backward shift: every slot after the hole that its probe could not reach without
        // passing the hole moves into it, so a lookup never stops early at an emptied slot.
        for (size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
            if (!slots_[j].path) break;
            const size_t home = slots_[j].hash & mask_;
            // Can slot j's entry stay? Only if its home lies cyclically in (i, j].
            const bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
            if (stays) continue;
            slots_[i] = slots_[j];
            i = j;
        }
        slots_[i] = {};
        --count_;
    }

    size_t size() const { return count_; }

private:
    struct Slot {
        uint64_t hash = 0;
        const std::string* path = nullptr; // null: empty
    };
    static uint64_t hash(std::string_view p) { return XXH3_64bits(p.data(), p.size()); }

    void grow() {
        std::vector<Slot> old = std::move(slots_);
        slots_.assign(old.empty() ? 1024 : old.size() * 2, Slot{});
        mask_ = slots_.size() - 1;
        for (const Slot& s : old) {
            if (!s.path) continue;
            size_t i = s.hash & mask_;
            while (slots_[i].path) i = (i + 1) & mask_;
            slots_[i] = s;
        }
    }

    std::vector<Slot> slots_; // a power of two in size
    size_t mask_ = 0;
    size_t count_ = 0;
};

} // namespace sluice
