#!/usr/bin/env python3
"""Where a large-file server's samples are, by call chain, from `large.py --perf-dir` (perf
record -g -C SERVER_CPU): the client's receive on the veth run in softirq on the server's CPU,
segments going out (tcp_write_xmit), page cache -> pipe and pipe -> skb frags inside
sendfile, ACKs handled at release_sock, io_uring / epoll, user space.
usage: perf_where.py PERF.DATA PID[,PID...]   (the server's pids, from the JSON's perf_runs)"""
import collections
import subprocess
import sys


def classify(chain):
    s = set(chain)
    if s & {"net_rx_action", "handle_softirqs", "__do_softirq"}:
        return "softirq: ACKs in" if "tcp_ack" in s and "tcp_data_queue" not in s else \
            "softirq: receive (veth: the client's side, on the server's CPU)"
    if "__release_sock" in s:
        return "ACKs / backlog at release_sock"
    if "filemap_splice_read" in s:
        return "sendfile: page cache -> pipe"
    if "tcp_write_xmit" in s:
        return "sendfile: tcp_write_xmit (segments out)"
    if "splice_to_socket" in s:
        return "sendfile: pipe -> skb frags"
    if s & {"do_splice_direct", "__x64_sys_sendfile64"}:
        return "sendfile: other"
    if any("io_uring" in x or x.startswith("io_") for x in s):
        return "io_uring"
    if any("epoll" in x for x in s):
        return "epoll"
    if s & {"schedule", "__schedule"}:
        return "schedule"
    if any(x.startswith(("__x64_sys", "do_syscall_64")) for x in s):
        return "other syscalls"
    return "other (user space, interrupts)"


def main():
    data, pids = sys.argv[1], sys.argv[2]
    out = subprocess.run(["perf", "script", "-i", data, "--pid", pids, "-F", "pid,ip,sym"], capture_output=True,
                         text=True, check=True).stdout
    counts = collections.Counter()
    chain = []
    for line in out.splitlines() + [""]:
        if line.startswith(("\t", " " * 8)) and line.split()[1:]:
            chain.append(line.split()[1].split("+")[0])
            continue
        if chain:
            counts[classify(chain)] += 1
        chain = []
    total = sum(counts.values())
    for k, v in counts.most_common():
        print(f"{100 * v / total:5.1f}%  {k}")
    print(f"{total} samples")


if __name__ == "__main__":
    main()
