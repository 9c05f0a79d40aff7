#pragma once
// How the direct path allocates a file as its data arrives (direct_receiver.cpp).
#include <cstdint>

#include "recv/store/file_table.hpp"

namespace sluice {

// Allocates f (open as fd) as its data arrives, a front [0, allocated_to) shared by the
// streams: an O_DIRECT write into allocated (unwritten) extents is an overwrite, which ext4
// issues inline instead of handing it to an io-wq worker as it does for writes that extend the
// file (receiver CPU -17% on a 2 GiB file). The front runs ahead of the bytes written to the
// file by at most as many again, capped at 1 GiB, so a sender that declares a large file and
// stops (or sends far-apart scraps of it) leaves on the disk at most about twice what it sent:
// never the declared size. It moves in steps of at least a quarter of that (or up to the end of
// the file), so a 2 GiB file costs about 10 fallocates. Few on purpose: ext4's fallocate waits
// for every O_DIRECT write in flight on the file and holds new ones back meanwhile
// (inode_dio_wait under the inode lock), and all streams write the same large file: with a
// 64 MiB cap, 386 fallocates on 8 files of 2 GiB stalled the receiving streams 7.5 s in a
// 16 s transfer (median 19 ms each; 72 and 1.8 s at 1 GiB; docs/benchmarks.md, "Issue 19
// (h19n)"). A write beyond what the front may cover is written unallocated. Existing data (a
// resumed file) is kept. [offset, end): the bytes about to be written. refused: set (and then
// honoured) once the file system has no fallocate: writes extend the file.
void allocate_ahead(RecvFile& f, int fd, uint64_t offset, uint64_t end, bool& refused);

} // namespace sluice
