/* XXH3-64 compiled for AVX2 (this file alone is built with -mavx2; xxh3.cpp calls it only on
 * CPUs that have AVX2). Debian's libxxhash is built for SSE2, which hashes at about half the
 * speed: hashing every block on both sides was the largest user-space cost in the profile. */
#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_AVX2
#include <xxhash.h>

unsigned long long sluice_xxh3_64_avx2(const void* p, size_t n) { return XXH3_64bits(p, n); }
void sluice_xxh3_reset_avx2(XXH3_state_t* s) { XXH3_64bits_reset(s); }
void sluice_xxh3_update_avx2(XXH3_state_t* s, const void* p, size_t n) { XXH3_64bits_update(s, p, n); }
unsigned long long sluice_xxh3_digest_avx2(const XXH3_state_t* s) { return XXH3_64bits_digest(s); }
