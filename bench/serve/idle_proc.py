"""What /proc says about the idle bench's processes and the kernel (bench/serve/idle.py).

Server memory is summed over several `sluice serve` processes: RSS counts every shared page
(the binary, libc, liburing) once per process, so with K processes it overstates user-space
memory K-fold for those pages. Pss divides each shared page among the processes mapping it
(the sum over processes counts it once) and Private_* counts only pages no other process maps:
those two are what the per-connection figures use; RSS is kept beside them for comparison."""
import os
from pathlib import Path

ROLLUP_KEYS = ("Rss", "Pss", "Private_Clean", "Private_Dirty")


def meminfo():
    out = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        k, v = line.split(":", 1)
        out[k] = int(v.split()[0]) * 1024
    return out


def rollup(pid):
    """Rss, Pss, Private_Clean and Private_Dirty of one process in bytes, from smaps_rollup."""
    out = dict.fromkeys(ROLLUP_KEYS, 0)
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in out:
            out[k] = int(v.split()[0]) * 1024
    return out


def rollup_sum(pids):
    """The sums over `pids` plus Private (clean + dirty), and each process's own figures."""
    each = {pid: rollup(pid) for pid in pids}
    total = {k: sum(e[k] for e in each.values()) for k in ROLLUP_KEYS}
    total["Private"] = total["Private_Clean"] + total["Private_Dirty"]
    return total, each


def socket_inodes(pid):
    """The inodes of the sockets `pid` holds: the kernel's own count of its connections (plus
    its listeners), and how a connection seen by `ss` is tied to the process that accepted it."""
    fd_dir = f"/proc/{pid}/fd"
    out = set()
    for name in os.listdir(fd_dir):
        try:
            target = os.readlink(f"{fd_dir}/{name}")
        except OSError:
            continue  # closed between listdir and readlink
        if target.startswith("socket:["):
            out.add(int(target[8:-1]))
    return out


def loadavg():
    return Path("/proc/loadavg").read_text().split()[:3]
