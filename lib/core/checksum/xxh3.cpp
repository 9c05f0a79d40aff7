#include "core/checksum/xxh3.hpp"

#include <new>

#if defined(__x86_64__)
extern "C" {
unsigned long long sluice_xxh3_64_avx2(const void* p, size_t n);
void sluice_xxh3_reset_avx2(XXH3_state_t* s);
void sluice_xxh3_update_avx2(XXH3_state_t* s, const void* p, size_t n);
unsigned long long sluice_xxh3_digest_avx2(const XXH3_state_t* s);
}
#endif

namespace sluice {

namespace {

#if defined(__x86_64__)
const bool kAvx2 = __builtin_cpu_supports("avx2");
#else
constexpr bool kAvx2 = false;
#endif

} // namespace

uint64_t xxh3_64(const void* p, size_t n) {
#if defined(__x86_64__)
    if (kAvx2) return sluice_xxh3_64_avx2(p, n);
#endif
    return XXH3_64bits(p, n);
}

// The state's layout is the same for both variants (one xxhash.h); only the loops differ.
Xxh3::Xxh3() : state_(XXH3_createState()) {
    if (!state_) throw std::bad_alloc();
    reset();
}

void Xxh3::reset() {
#if defined(__x86_64__)
    if (kAvx2) return sluice_xxh3_reset_avx2(state_.get());
#endif
    XXH3_64bits_reset(state_.get());
}

void Xxh3::update(const void* p, size_t n) {
#if defined(__x86_64__)
    if (kAvx2) return sluice_xxh3_update_avx2(state_.get(), p, n);
#endif
    XXH3_64bits_update(state_.get(), p, n);
}

uint64_t Xxh3::digest() const {
#if defined(__x86_64__)
    if (kAvx2) return sluice_xxh3_digest_avx2(state_.get());
#endif
    return XXH3_64bits_digest(state_.get());
}

} // namespace sluice
