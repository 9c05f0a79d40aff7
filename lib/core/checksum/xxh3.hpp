#pragma once
// XXH3-64, the block checksum, at the fastest width this CPU runs (AVX2 where it has it, else
// the system libxxhash). Same results either way: the wire format does not change.
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace sluice {

uint64_t xxh3_64(const void* p, size_t n);

// Streaming form, for a block that arrives in pieces.
class Xxh3 {
public:
    Xxh3();
    void reset();
    void update(const void* p, size_t n);
    uint64_t digest() const;

private:
    struct Free {
        void operator()(XXH3_state_t* s) const noexcept { XXH3_freeState(s); }
    };
    std::unique_ptr<XXH3_state_t, Free> state_;
};

} // namespace sluice
