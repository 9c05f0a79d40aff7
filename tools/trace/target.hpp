// The traced command: forked stopped at a gate, so the probe knows its pid before it runs
// a single instruction of COMMAND; released with go(); reaped with wait().
#pragma once
#include <string>
#include <sys/types.h>
#include <vector>

namespace sluice::trace {

class Target {
public:
    explicit Target(const std::vector<std::string>& command);
    ~Target(); // kills and reaps a child that was never released
    Target(const Target&) = delete;
    Target& operator=(const Target&) = delete;

    pid_t pid() const { return pid_; }
    // Let the child exec COMMAND. Throws TraceError when the exec failed.
    void go();
    // Non-blocking reap; true once the child has exited (exit_status() is then valid).
    bool poll_exit();
    // Shell convention: the exit code, or 128 + signal.
    int exit_status() const { return status_; }

private:
    pid_t pid_ = -1;
    int gate_fd_ = -1; // write end: closing it releases the child
    int err_fd_ = -1;  // read end of a CLOEXEC pipe: the child writes errno here if exec fails
    bool released_ = false, reaped_ = false;
    int status_ = -1;
};

} // namespace sluice::trace
