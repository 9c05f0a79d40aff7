// /proc readers: user/system CPU of a process, whether it is still running, its threads.
#pragma once
#include <optional>
#include <sys/types.h>
#include <vector>

namespace sluice::trace {

struct ProcTimes {
    double user_s = 0, sys_s = 0;
};

// utime/stime of the whole thread group (clock ticks, so 1/CLK_TCK resolution).
std::optional<ProcTimes> read_proc_times(pid_t pid);
// False when the process is gone or a zombie.
bool process_alive(pid_t pid);
std::vector<pid_t> list_threads(pid_t pid);

} // namespace sluice::trace
