"""The commands bench/serve/idle.py runs in its namespace, and its wrk steps: wrk against
sluice's K processes (profiled with --perf-dir) or, with --peer-nginx, against sluice and nginx
alternated."""
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from idle_client import PORT  # noqa: E402
from idle_nginx import NGINX_PORT  # noqa: E402
from idle_perf import profile  # noqa: E402
from run import parse_wrk  # noqa: E402 (the same wrk output as the serve bench)

NS = "h15d-idle"


def in_ns(cpu, *cmd):
    # setsid execs in place (the pid stays): a side's CPU share is not weighted by autogroups.
    return ["ip", "netns", "exec", NS, "taskset", "-c", cpu, "setsid", *map(str, cmd)]


def boost(pid, nice=-20):
    """The autogroup of `pid` (its own session, made by in_ns's setsid) at `nice`: against the
    other users' sessions on this shared machine it then gets the CPU as on a quiet machine.
    Waits (bounded) for the setsid: before it the process is still in this script's session,
    whose group must not be changed. Returns whether it was set."""
    end = time.monotonic() + 5
    while time.monotonic() < end:
        try:
            if int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3]) == pid:
                Path(f"/proc/{pid}/autogroup").write_text(str(nice))
                return True
        except (OSError, ValueError, IndexError):
            return False
        time.sleep(0.005)
    return False


def run_wrk(conns, seconds, perf_dir=None, tag=None, result=None, groups=None, port=PORT, record=True,
            boosted=False):
    cmd = in_ns("1", "wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--latency", "--timeout", "10s",
                f"http://127.0.0.1:{port}/1k.bin")
    w = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if boosted and not boost(w.pid):
        w.kill()
        raise SystemExit("wrk: its autogroup could not be set (--boost)")
    if not perf_dir:
        out, _ = w.communicate(timeout=seconds + 60)
        return parse_wrk(out)
    try:
        # profile the middle of the run: from 1 s in, for all but the last second
        finish = profile(perf_dir, tag, 1, max(1, seconds - 2), dict(groups or {}, wrk=[w.pid]), record)
        result[f"perf_{tag}"] = finish()  # before wrk ends: its CPU is read while it runs
        out, _ = w.communicate(timeout=seconds + 60)
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
    return parse_wrk(out)


def wrk_step(a, result, key, groups):
    """One wrk step: sluice alone (perf too with --perf-dir), or with groups["nginx"] sluice and
    nginx alternated a.rounds times (each server's figures: the mean rate and p99 of its rounds;
    --perf-dir's window figures for each run under perf_TAG_SERVER_ROUND).
    groups: name -> pids whose CPU time each profiled window reports."""
    tag = {"wrk_no_idle": "no_idle", "wrk_with_idle": "idle_held", "wrk_after_idle": "after_idle"}[key]
    if not groups.get("nginx"):
        result[key] = run_wrk(a.active, a.seconds, a.perf_dir, tag, result, groups, record=not a.counters,
                              boosted=a.boost)
        return
    runs = {"sluice": [], "nginx": []}
    for r in range(a.rounds):
        for name in ("sluice", "nginx") if r % 2 == 0 else ("nginx", "sluice"):
            runs[name].append(run_wrk(a.active, a.seconds, a.perf_dir, f"{tag}_{name}_{r}", result, groups,
                                      PORT if name == "sluice" else NGINX_PORT, not a.counters, a.boost))
    for name, rs in runs.items():
        mean = {k: sum(x[k] for x in rs) / len(rs) for k in ("rps", "p50_ms", "p99_ms")}
        result[key if name == "sluice" else f"nginx_{key}"] = dict(mean, rounds=rs)
