#pragma once
// ThreadSanitizer and a ring's mappings. liburing 2.3 maps and unmaps a ring's SQ/CQ rings and
// its SQE array with raw syscalls (liburing.so.2 imports no mmap or munmap), so TSan never sees
// a mapping go: when a stream thread's ring was torn down and the next stream's new ring was
// mapped at the same address, the new thread's SQE writes were reported as racing with the old
// thread's (scripts/test-tsan). The kernel orders the two (the old munmap comes before a new mmap
// can return that address), so a ring that ends releases each mapping's address and a new ring
// acquires its own: TSan sees that order between the two rings that shared an address, and no
// other. Outside a TSan build these are empty.
#include <liburing.h>

#if defined(__SANITIZE_THREAD__)
#define SLUICE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SLUICE_TSAN 1
#endif
#endif
#ifdef SLUICE_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace sluice::ring_mapping {

#ifdef SLUICE_TSAN
inline void each(const io_uring& r, void (*f)(void*)) noexcept {
    for (void* p : {r.sq.ring_ptr, r.cq.ring_ptr, static_cast<void*>(r.sq.sqes)})
        if (p) f(p);
}
inline void made(const io_uring& r) noexcept { each(r, __tsan_acquire); }
// Before io_uring_queue_exit unmaps them.
inline void ending(const io_uring& r) noexcept { each(r, __tsan_release); }
#else
inline void made(const io_uring&) noexcept {}
inline void ending(const io_uring&) noexcept {}
#endif

} // namespace sluice::ring_mapping
