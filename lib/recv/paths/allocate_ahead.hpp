#pragma once
// How the direct path allocates a file as its data arrives (direct_receiver.cpp).
#include <cstdint>

#include "recv/store/file_table.hpp"

namespace sluice {

// Allocates f (open as fd) as its data arrives, a front [0, allocated_to) shared by the
// streams: an O_DIRECT write into allocated (unwritten) extents is an overwrite, which ext4
// issues inline instead of handing it to an io-wq worker as it does for writes that extend the
// file (receiver CPU -17% on a 2 GiB file). The front runs ahead of the bytes written to the
// file by at most as many again, capped at 64 MiB, so a sender that declares a large file and
// stops (or sends far-apart scraps of it) leaves on the disk at most about twice what it sent,
// plus 64 MiB: never the declared size. It moves in steps of at least a quarter of that (or up
// to the end of the file), so a large file costs one fallocate per 16-64 MiB; a write beyond
// what the front may cover is written unallocated. Existing data (a resumed file) is kept.
// [offset, end): the bytes about to be written. refused: set (and then honoured) once the
// file system has no fallocate: writes extend the file.
void allocate_ahead(RecvFile& f, int fd, uint64_t offset, uint64_t end, bool& refused);

} // namespace sluice
