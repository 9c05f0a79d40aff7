"""Process control and CPU accounting for the bench: bounded waits on pidfds, process-group
kills, whole-machine busy time from /proc/stat and per-process rusage of reaped children."""
import os
import resource
import select
import shutil
import signal
import subprocess
import time

USER_HZ = os.sysconf("SC_CLK_TCK")


def machine_busy_s():
    """Busy CPU seconds of the whole machine so far, all CPUs, both namespaces alike:
    user + nice + system + irq + softirq from /proc/stat (idle, iowait, steal excluded)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[1:8])
    return (user + nice + system + irq + softirq) / USER_HZ


def children_cpu_s():
    """user + sys seconds of every child this process has reaped (and their reaped children)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Proc:
    """A command in its own session (process group) with stdout/stderr to files."""

    def __init__(self, argv, out_path, err_path, env=None, cwd=None):
        self.argv = argv
        self.out_path = out_path
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                      env=env, cwd=cwd, start_new_session=True)
        self.pidfd = os.pidfd_open(self.p.pid)
        self.end = None  # monotonic time the exit was seen

    @property
    def rc(self):
        return self.p.returncode

    def done(self):
        if self.p.returncode is None and self.p.poll() is not None:
            self.end = time.monotonic()
        return self.p.returncode is not None

    def wait(self, deadline):
        """Waits until exit or deadline (monotonic); True when exited."""
        while not self.done():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            select.select([self.pidfd], [], [], left)
        return True

    def kill(self, sig=signal.SIGTERM, grace=5.0):
        """Signals the whole process group; SIGKILL after grace seconds; always reaps."""
        if self.done():
            return
        try:
            os.killpg(self.p.pid, sig)
        except ProcessLookupError:
            pass
        if not self.wait(time.monotonic() + grace):
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.wait(time.monotonic() + 10)

    def close(self):
        self.kill(signal.SIGKILL, grace=1)
        os.close(self.pidfd)

    def first_line(self, deadline):
        """The first complete stdout line, waiting until the deadline or the process's exit."""
        while True:
            with open(self.out_path, "rb") as f:
                data = f.readline()
            if data.endswith(b"\n"):
                return data.decode(errors="replace").strip()
            if self.done() or time.monotonic() > deadline:
                return None
            time.sleep(0.01)

    def last_json_line(self):
        import json
        try:
            with open(self.out_path, "rb") as f:
                lines = f.read().decode(errors="replace").strip().splitlines()
        except OSError:
            return None
        for line in reversed(lines[-3:]):
            line = line.strip()
            if line.startswith("{"):
                try:
                    return json.loads(line)
                except ValueError:
                    return None
        return None


def wait_listening(ns, port, proc, deadline):
    """Polls `ss` in namespace ns until something listens on TCP port; False if proc died."""
    while time.monotonic() < deadline:
        if proc.done():
            return False
        out = subprocess.run(["ip", "netns", "exec", ns, "ss", "-Hltn", f"sport = :{port}"],
                             capture_output=True, text=True, timeout=10).stdout
        if out.strip():
            return True
        time.sleep(0.05)
    return False


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def warm_source(root, chunk=8 << 20):
    """Reads every file under root once, so that the run that follows starts with the whole set
    in the page cache. This VM runs a DAMON pageout scheme (kdamond.0: physical pages idle for
    30 s or more are paged out, page cache included, see docs/bench-wdt-report.md): a set left
    alone for a minute is mostly back on the disk, and without this the tool that happens to
    run first after a pause pays for re-reading it, warm-cache bench or not. Returns the bytes
    read."""
    buf = bytearray(chunk)
    total = 0
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = os.path.join(dirpath, n)
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            with open(p, "rb", buffering=0) as f:
                while True:
                    got = f.readinto(buf)
                    if not got:
                        break
                    total += got
    return total


def damon_pageout():
    """The kernel's DAMON pageout schemes, if any run: [(kdamond, min age s, action)]. Said in
    the results so that a reader knows how long 'warm' lasts on the machine measured."""
    out = []
    base = "/sys/kernel/mm/damon/admin/kdamonds"
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return out
    for k in names:
        kd = os.path.join(base, k)
        try:
            if open(os.path.join(kd, "state")).read().strip() != "on":
                continue
            ctx = os.path.join(kd, "contexts", "0")
            aggr_us = int(open(os.path.join(ctx, "monitoring_attrs", "intervals", "aggr_us")).read())
            sch_root = os.path.join(ctx, "schemes")
            for sc in sorted(x for x in os.listdir(sch_root) if x.isdigit()):
                sch = os.path.join(sch_root, sc)
                action = open(os.path.join(sch, "action")).read().strip()
                age = int(open(os.path.join(sch, "access_pattern", "age", "min")).read())
                out.append({"kdamond": k, "action": action, "min_age_s": age * aggr_us / 1e6})
        except (OSError, ValueError):
            continue
    return out


def prefault(path, nbytes, chunk=8 << 20):
    """Writes nbytes of zeros to a scratch file and deletes it. On this VM the host takes back
    freed guest pages a few seconds after they are freed and the next first write to each costs
    a host fault (~2-3 s/GiB); pages freed just now are reused at full speed. Run right before a
    transfer, this gives every tool the same, recently backed memory to write into."""
    buf = bytes(chunk)
    with open(path, "wb", buffering=0) as f:
        left = nbytes
        while left > 0:
            left -= f.write(buf[:min(left, chunk)])
    os.unlink(path)


class Trash:
    """Receive trees, removed where their deletion cannot slow the next run's file creates.

    On this journal-less ext4 an inode allocation skips every free inode of its group deleted in
    the last ~35 s (find_inode_bit -> recently_deleted(), docs/bench-wdt-report.md): a tree
    deleted right before a run makes that run's creates slower, and the figure measures the
    delete. So a received tree is kept until the end of the call (close()) while the disk can hold
    it and the next run's tree beside `reserve` bytes; when it cannot, the tree goes at once and
    settle() makes the next run wait until `quiet_s` have passed since that delete. Every wait is
    logged by the caller (settle() returns the seconds waited)."""

    def __init__(self, quiet_s=40.0, reserve=5e9, keep_bytes=float("inf")):
        self.quiet_s = quiet_s
        self.reserve = reserve
        self.keep_bytes = keep_bytes  # at most this much kept (a helper's disk budget)
        self.kept = []
        self.kept_bytes = 0
        self.deleted_at = None

    def put(self, path, next_bytes):
        """path: a tree just received, of about next_bytes; next_bytes: also what the next run
        writes beside it."""
        st = os.statvfs(os.path.dirname(os.path.abspath(path)))
        if (st.f_bavail * st.f_frsize >= next_bytes + self.reserve
                and self.kept_bytes + next_bytes <= self.keep_bytes):
            self.kept.append(path)
            self.kept_bytes += next_bytes
            return
        shutil.rmtree(path, ignore_errors=True)
        self.deleted_at = time.monotonic()

    def settle(self):
        if self.deleted_at is None:
            return 0.0
        wait = self.deleted_at + self.quiet_s - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        return max(wait, 0.0)

    def close(self):
        for p in self.kept:
            shutil.rmtree(p, ignore_errors=True)
        self.kept = []
        self.kept_bytes = 0
