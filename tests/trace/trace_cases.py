#!/usr/bin/env python3
"""Traces of workloads whose counts are certain, checked against `sluice trace --json`.

usage: trace_cases.py CASE CLI WORKLOAD [--no-kernel-reads]
Exit 77 (meson: skipped) when not root. Every child runs under a timeout.
"""
import json
import os
import subprocess
import sys
import tempfile

SIZE = 32 << 20          # the test file: big enough that loader/libc noise is well under TOL
TOL = 256 << 10          # bytes of slack for what the dynamic loader and libc read/write
TIMEOUT = 60


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)
    print("ok:", msg)


def near(value, want, what, tol=TOL):
    check(abs(value - want) <= tol, f"{what}: {value} within {tol} of {want}")


class Env:
    def __init__(self, cli, workload, extra):
        self.cli, self.workload, self.extra = cli, workload, extra
        self.tmp = tempfile.mkdtemp(prefix="sluice-trace-test-")
        self.file = os.path.join(self.tmp, "data")
        with open(self.file, "wb") as f:
            f.write(os.urandom(SIZE))
        with open(self.file, "rb") as f:  # into the page cache
            while f.read(1 << 20):
                pass

    def trace(self, argv, pre=(), expect_rc=0, env=None):
        out = os.path.join(self.tmp, "trace.json")
        cmd = list(pre) + [self.cli, "--json", "-o", out] + self.extra + ["--"] + argv
        r = subprocess.run(cmd, timeout=TIMEOUT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           env=env)
        if expect_rc is not None and r.returncode != expect_rc:
            fail(f"{cmd} exited {r.returncode}, wanted {expect_rc}: {r.stderr}")
        with open(out) as f:
            return json.load(f), r

    def no_kernel_reads(self):
        return "--no-kernel-reads" in self.extra

    def cleanup(self):
        subprocess.run(["rm", "-rf", self.tmp], timeout=TIMEOUT)


def stage(report, comm, nth=0):
    found = [s for s in report["stages"] if s["comm"] == comm]
    if len(found) <= nth:
        fail(f"no stage #{nth} named {comm}: {[s['comm'] for s in report['stages']]}")
    return found[nth]


def cls(st, name, field):
    return st["by_fd_class"].get(name, {}).get(field, 0)


# The environment of a trace that may not look at /proc/PID/fd once tracing has started: what
# the no-kernel-reads probe then classifies, it knows from the syscalls that made the fds (or
# their open paths), however soon the process exits.
NO_LATE_PROC = dict(os.environ, SLUICE_TRACE_NO_LATE_PROC="1")


def check_variant(report, extra, unresolved=0):
    want = "no-kernel-reads" if "--no-kernel-reads" in extra else "kernel-reads"
    check(report["summary"]["method"] == want, f"probe variant is {want}")
    for s in report["stages"]:
        for key in ("pid", "comm", "copied_bytes", "zero_copy_bytes", "syscalls", "cpu_ns", "by_fd_class",
                    "by_io_uring_op"):
            if key not in s:
                fail(f"stage lacks {key}")
    # Every fd in these workloads is made by a syscall the probe follows, is opened by path,
    # or was there when tracing started: nothing is left to a race with the process's exit.
    check(report["summary"]["unresolved_bytes"] == unresolved,
          f"{report['summary']['unresolved_bytes']} bytes unresolved, wanted {unresolved} "
          f"({report['methods']['fd_class'][-120:]})")


def case_dd(env):
    rep, _ = env.trace(["dd", f"if={env.file}", "of=/dev/null", "bs=1M"])
    check_variant(rep, env.extra)
    dd = stage(rep, "dd")
    near(cls(dd, "file", "copied_read"), SIZE, "dd reads the file (copied kernel->user)")
    near(cls(dd, "/dev/null", "no_data"), SIZE, "dd writes to /dev/null as no data")
    check(dd["copied_out_bytes"] < TOL, "writes to /dev/null are not counted as copies")
    check(dd["syscalls"] >= 2 * SIZE // (1 << 20), "at least one read and one write syscall per MiB")
    check(dd["cpu_ns"] > 0, "on-CPU time measured")
    near(rep["summary"]["payload_bytes"], SIZE, "payload is the file size")
    near(rep["summary"]["copies_per_byte"], 1.0, "one copy per payload byte", tol=0.02)


def case_direct(env):
    # O_DIRECT file I/O is the device's DMA: neither direction is a CPU copy.
    out = os.path.join(env.tmp, "direct-out")
    rep, _ = env.trace(["dd", "if=/dev/zero", f"of={out}", "bs=1M", f"count={SIZE >> 20}", "oflag=direct"])
    check_variant(rep, env.extra)
    dd = stage(rep, "dd")
    near(cls(dd, "file", "zero_copy_written"), SIZE, "O_DIRECT writes are counted as zero-copy (DMA)")
    check(cls(dd, "file", "copied_written") < TOL, "O_DIRECT writes are not counted as copies")
    rep, _ = env.trace(["dd", f"if={env.file}", "of=/dev/null", "bs=1M", "iflag=direct"])
    dd = stage(rep, "dd")
    near(cls(dd, "file", "zero_copy_read"), SIZE, "O_DIRECT reads are counted as zero-copy (DMA)")
    check(cls(dd, "file", "copied_read") < TOL, "O_DIRECT reads are not counted as copies")
    check(rep["summary"]["copies_per_byte"] < 0.02, "no CPU copies in an O_DIRECT read to /dev/null")


def case_cat_pipe(env):
    rep, _ = env.trace(["sh", "-c", f"cat {env.file} | cat > /dev/null"])
    check_variant(rep, env.extra)
    first, second = stage(rep, "cat", 0), stage(rep, "cat", 1)
    near(cls(first, "file", "copied_read"), SIZE, "first cat reads the file")
    near(cls(first, "pipe", "copied_written"), SIZE, "first cat copies into the pipe")
    near(cls(second, "pipe", "copied_read"), SIZE, "second cat copies out of the pipe")
    near(cls(second, "/dev/null", "no_data"), SIZE, "second cat's /dev/null writes move no data")
    near(rep["summary"]["copies_per_byte"], 3.0, "three copies per payload byte", tol=0.05)


def case_sendfile(env):
    rep, _ = env.trace([env.workload, "sendfile", env.file])
    check_variant(rep, env.extra)
    total_copied = sum(s["copied_bytes"] for s in rep["stages"])
    check(total_copied < TOL, f"no user copies of the payload ({total_copied} bytes copied)")
    sender = next(s for s in rep["stages"] if "sendfile" in s["by_syscall"])
    near(sender["by_syscall"]["sendfile"]["bytes"], SIZE, "sendfile moved the file")
    near(sender["zero_copy_bytes"], SIZE, "sendfile file->pipe counted as zero-copy")
    check(sender["kernel_copy_bytes"] == 0, "file->pipe needs no kernel copy")


def case_splice(env):
    out = os.path.join(env.tmp, "out")
    rep, _ = env.trace([env.workload, "splice", env.file, out])
    check_variant(rep, env.extra)
    s = rep["summary"]
    check(s["copied_bytes"] < TOL, "no user copies in a splice pipeline")
    near(s["zero_copy_bytes"], 2 * SIZE, "both splices moved the file without a user copy")
    near(s["kernel_copy_bytes"], SIZE, "pipe->file splice is named as a kernel copy")
    check(os.path.getsize(out) == SIZE, "the output file is complete")


def case_uring(env):
    out = os.path.join(env.tmp, "out")
    rep, _ = env.trace([env.workload, "uring", env.file, out])
    check_variant(rep, env.extra)
    st = next(s for s in rep["stages"] if s["by_io_uring_op"])
    ops = st["by_io_uring_op"]
    near(ops.get("io_uring:read", {}).get("bytes", 0), SIZE, "IORING_OP_READ bytes")
    check(ops["io_uring:read"]["kind"] == "copy_in", "IORING_OP_READ is a kernel->user copy")
    near(ops.get("io_uring:splice", {}).get("bytes", 0), 2 * SIZE, "IORING_OP_SPLICE bytes (both legs)")
    near(st["kernel_copy_bytes"], SIZE, "io_uring splice pipe->file named as a kernel copy")
    workers = [t for t in st["threads"] if t["comm"].startswith("iou-wrk")]
    check(workers and all(t["cpu_ns"] > 0 for t in workers), "io-wq worker CPU charged to the process")


def case_exit_status(env):
    _, r = env.trace(["sh", "-c", "exit 7"], expect_rc=7)
    check(r.returncode == 7, "exit status 7 passed through")
    _, r = env.trace(["sh", "-c", "kill -TERM $$"], expect_rc=143)
    check(r.returncode == 143, "death by SIGTERM passed through as 128+15")
    r = subprocess.run([env.cli, "--", "/nonexistent/command"], timeout=TIMEOUT, capture_output=True, text=True)
    check(r.returncode == 127 and "sluice trace: error:" in r.stderr, "a command that cannot run: 127 and a message")


def case_attach(env):
    # A process started outside the tracer, attached to with -p. It starts its child only once
    # the tracer says it is tracing (loading the probe can take over a second on a busy machine).
    # The child is a dd that lives a few milliseconds: without kernel reads its fds must be
    # classified from the syscalls that made them, not from /proc after it is gone.
    rep = attach_once(env)
    check_variant(rep, env.extra)
    dd = stage(rep, "dd")
    near(cls(dd, "file", "copied_read"), SIZE, "a child of the attached process is traced")
    near(cls(dd, "/dev/null", "no_data"), SIZE, "its /dev/null writes move no data")


def attach_once(env):
    go = os.path.join(env.tmp, "attach.go")
    # No deadline in the wait: the test's own timeout and proc.kill() end it if need be.
    proc = subprocess.Popen(["sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done; "
                                         f"dd if={env.file} of=/dev/null bs=1M 2>/dev/null"])
    try:
        out = os.path.join(env.tmp, "attach.json")
        tracer = subprocess.Popen([env.cli, "--json", "-o", out] + env.extra + ["-p", str(proc.pid)],
                                  stderr=subprocess.PIPE, text=True, env=NO_LATE_PROC)
        first = tracer.stderr.readline()
        check("tracing" in first, f"the tracer says when it is attached ({first.strip()})")
        open(go, "w").close()
        err = tracer.stderr.read()
        tracer.wait(timeout=TIMEOUT)
        check(tracer.returncode == 0, f"attach run succeeded ({(first + err).strip()})")
        with open(out) as f:
            return json.load(f)
    finally:
        proc.kill()
        proc.wait(timeout=TIMEOUT)


def case_fds(env):
    # One process that exits at once makes fds every way the probe follows (workload_fds.cpp),
    # traced without any /proc lookup after the start: each class must still come out right.
    # Two eventfds reuse /dev/null numbers freed by close and close_range; only /proc could say
    # what they are. stdout (/dev/null here) was there before tracing started.
    rep, _ = env.trace([env.workload, "fds", env.file], env=NO_LATE_PROC)
    check_variant(rep, env.extra, unresolved=8000 if env.no_kernel_reads() else 0)
    MiB = 1 << 20
    parent = stage(rep, "sluice-trace-wo")
    child = next((s for s in rep["stages"] if s["ppid"] == parent["pid"]), None) or fail("no forked child")
    check(cls(parent, "/dev/null", "no_data") == 7 * MiB,
          "openat, dup, dup2, dup3, F_DUPFD, fd 2000 and stdout: all /dev/null")
    check(cls(child, "/dev/null", "no_data") == MiB, "a forked child's stdout from before tracing: /dev/null")
    check(cls(parent, "pipe", "copied_written") == MiB and cls(parent, "pipe", "copied_read") == 2 * MiB,
          "pipe2: both ends are pipes")
    check(cls(child, "pipe", "copied_written") == MiB, "a forked child's inherited pipe end is a pipe")
    check(cls(parent, "socket", "copied_written") == 3 * MiB and cls(parent, "socket", "copied_read") == 3 * MiB,
          "socketpair, socket, accept4: sockets")
    near(cls(parent, "file", "copied_read"), SIZE + 3 * MiB,
         "open: the file read by its path, and by its name from the cwd, a directory fd and after fchdir")
    check(cls(child, "file", "copied_read") == MiB, "a forked child's relative open, from the cwd it inherited")
    check(cls(parent, "file", "copied_written") == 512 << 10, "memfd_create: a file")
    if not env.no_kernel_reads():
        check(cls(parent, "other", "copied_written") == 8000, "eventfd on a reused number: other")


def case_errors(env):
    # Not root: a clear message, non-zero exit.
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
                        env.cli, "--", "true"], timeout=TIMEOUT, capture_output=True, text=True)
    check(r.returncode != 0 and "root or CAP_BPF" in r.stderr, f"non-root refused with a message: {r.stderr.strip()}")
    # No BTF: hide it in a private mount namespace.
    r = subprocess.run(["unshare", "-m", "sh", "-c", f"mount -t tmpfs none /sys/kernel/btf && {env.cli} -- true"],
                       timeout=TIMEOUT, capture_output=True, text=True)
    check(r.returncode != 0 and "BTF" in r.stderr and "CONFIG_DEBUG_INFO_BTF" in r.stderr,
          f"missing BTF named: {r.stderr.strip()}")
    # tracefs unmounted (private mount namespace): the tool mounts it and runs.
    r = subprocess.run(["unshare", "-m", "sh", "-c",
                        "umount /sys/kernel/tracing 2>/dev/null; umount /sys/kernel/debug 2>/dev/null; "
                        f"test ! -e /sys/kernel/tracing/events && {env.cli} -o /dev/null -- sh -c 'exit 5'"],
                       timeout=TIMEOUT, capture_output=True, text=True)
    check(r.returncode == 5, f"tracefs mounted by the tool when unmounted ({r.stderr.strip()})")
    # Usage errors.
    r = subprocess.run([env.cli], timeout=TIMEOUT, capture_output=True, text=True)
    check(r.returncode != 0 and "sluice trace: error:" in r.stderr, "no command: usage error")
    # A command-line error shows the usage; a failure after parsing does not (decided by where
    # the error came from, not by its text).
    r = subprocess.run([env.cli, "--no-such-flag", "--", "true"], timeout=TIMEOUT, capture_output=True, text=True)
    check(r.returncode == 2 and "usage: sluice trace" in r.stderr, f"unknown option shows the usage ({r.stderr.strip()[:200]})")
    r = subprocess.run([env.cli, "-o", "/nonexistent-dir/report", "--", "true"], timeout=TIMEOUT, capture_output=True, text=True)
    check(r.returncode == 2 and "cannot write" in r.stderr and "usage: sluice trace" not in r.stderr,
          f"a bad output path names it without the usage ({r.stderr.strip()[:200]})")


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    if len(sys.argv) < 4 or sys.argv[1] not in CASES:
        print(__doc__, "cases:", " ".join(CASES))
        return 2
    if os.geteuid() != 0:
        print("SKIP: tracing needs root")
        return 77
    env = Env(sys.argv[2], sys.argv[3], sys.argv[4:])
    try:
        CASES[sys.argv[1]](env)
    finally:
        env.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
