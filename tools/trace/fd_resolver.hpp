// What an fd is, from user space: for the no-kernel-reads probe, which knows the class of most
// fds from the syscall that created them and leaves the rest to this (see bpf/fd_table.bpf.h):
// an open() path, fds a process had before tracing started, and fds it never saw created.
// stat() gives the same inode mode and rdev the kernel-reads probe looks at.
#pragma once
#include "model.hpp"
#include "trace.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace sluice::trace {

struct FdInfo {
    FdClass cls = FdClass::unresolved;
    bool writable = false; // decides vmsplice's direction
    bool direct = false;   // O_DIRECT: file reads and writes are DMA, not CPU copies
    bool cloexec = false;
    uint64_t dev = 0, ino = 0; // which file, to notice that an fd changed
};

class FdResolver {
public:
    // The id the probe's fd table holds for (tgid, fd) now, 0 if none. An answer from /proc is
    // kept only if this still returns the event's id after reading it: the fd then still
    // named the same open file.
    using CurrentId = std::function<uint32_t(uint32_t tgid, int32_t fd)>;
    // late_proc=false: never look at /proc/PID/fd after the fact (the tests use this to show
    // what the probe and the open paths alone resolve).
    explicit FdResolver(CurrentId current = {}, bool late_proc = true) : current_(std::move(current)), late_proc_(late_proc) {}

    // SL_EV_FD_SEEN: an fd the probe never saw created is in use; /proc is the only source.
    void seen(const sl_event& ev);
    // SL_EV_FD_OPEN: open() made this fd; /proc while the fd is still that file, else its path
    // (a relative one against the cwd or directory fd this follows below).
    void opened(const sl_open_event& ev);

    // The working directory of each process, so a relative open path can be stat'ed after the
    // process is gone: a tracked process's from /proc when tracing starts, a child's from its
    // parent, then every chdir/fchdir (SL_EV_CHDIR) it makes.
    void started(uint32_t pid);
    void forked(uint32_t child, uint32_t parent);
    void chdir(const sl_open_event& ev);
    // unresolved when no event named id or it could not be resolved.
    FdInfo lookup(uint32_t id) const;

    struct Counts {
        unsigned opened_proc = 0; // opened; /proc/PID/fd/N while it was still that file
        unsigned opened_path = 0; // opened; stat(path) after the fd was gone
        unsigned seen_proc = 0;   // never seen created; /proc/PID/fd/N on first use
        unsigned unresolved = 0;
    };
    const Counts& counts() const { return counts_; }

    // fd in process pid, from /proc/PID/fd/N and /proc/PID/fdinfo/N.
    static FdInfo resolve(uint32_t pid, int32_t fd);
    // stat(path): class only.
    static FdInfo resolve_path(const std::string& path);
    // Every fd pid has now, resolved.
    static std::vector<std::pair<int32_t, FdInfo>> list(uint32_t pid);

private:
    void keep(uint32_t id, FdInfo info, unsigned Counts::*how);
    // ev's path made absolute, or "" when its starting directory is not known.
    std::string absolute(const sl_open_event& ev) const;
    std::map<uint32_t, FdInfo> cache_;
    std::map<uint32_t, std::string> cwd_;   // tgid -> working directory (kept after exit: a
                                            // thread may outlive the leader's exit event)
    std::map<uint32_t, std::string> paths_; // id of a directory opened by path -> its path
    CurrentId current_;
    bool late_proc_;
    Counts counts_;
};

} // namespace sluice::trace
