"""One run of the WDT-report bench (bench.py): Bench.one moves one data set with one tool over
one link, measures time and CPU, checks the received tree, and records the result."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import measure
from procs import (BENCH, QUIET, REPO, background_busy, kill_leftovers, log, netns_env, wait_all,
                   wait_first_failure_or_sender)

sys.path.insert(0, os.path.join(BENCH, "datasets"))
import verify  # noqa: E402


TIME = shutil.which("time", path="/usr/bin:/bin")  # GNU time, for each side's peak RSS


def read_rss_kb(path):
    """The %M line GNU time wrote (its last line: a killed daemon's file starts with a note)."""
    try:
        with open(path) as f:
            lines = [x.strip() for x in f if x.strip()]
        return int(lines[-1]) if lines and lines[-1].isdigit() else None
    except OSError:
        return None


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def stop_children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return
    for k in kids:
        try:
            os.kill(k, signal.SIGTERM)
        except ProcessLookupError:
            pass


class Bench:
    def __init__(self, a):
        self.a = a
        self.ns = netns_env()
        self.port = 20000
        self.runs = []
        self.failures = []
        # Receive directories: a fresh name per run under a parent marked TOPDIR (see clean_dst).
        self.rx = os.path.join(a.work, "rx")
        self.rx_count = 0
        self.dst = os.path.join(self.rx, "dst")
        self.trash = measure.Trash()
        self.tmp = os.path.join(a.work, "tmp")
        self.logs = os.path.join(a.out, "logs")
        os.makedirs(self.logs, exist_ok=True)

    def clean_dst(self):
        # Every run receives into a directory it has never used, under a parent flagged TOPDIR
        # (chattr +T), so ext4's Orlov allocator places it, by a hash of its name, in a block
        # group of its own. Otherwise the run would create its inodes where the previous run's
        # tree (or other work in /tmp) was deleted seconds before; on this journal-less ext4 the
        # allocator then skips each recently deleted inode (ext4 recently_deleted()) on every
        # create: 6,400 creates took 2.8 s of CPU there against 0.14 s in a fresh group, for
        # every tool alike. docs/bench-wdt-report.md, "What limits figures".
        # The previous run's tree went to self.trash: deleted at the end, or now if the disk
        # cannot hold it, and then the next run waits out the window (measure.Trash).
        waited = self.trash.settle()
        if waited:
            log(f"waited {waited:.0f} s after deleting the previous tree (ext4's recently-deleted window)")
        if not self.rx_count:
            os.makedirs(self.rx, exist_ok=True)
            r = subprocess.run(["chattr", "+T", self.rx], capture_output=True, text=True)
            if r.returncode != 0:
                log(f"note: chattr +T {self.rx} failed ({r.stderr.strip()}): receive trees may land "
                    "where earlier ones were deleted")
        self.rx_count += 1
        self.dst = os.path.join(self.rx, f"dst-{os.getpid()}-{self.rx_count}")
        os.makedirs(self.dst)
        shutil.rmtree(self.tmp, ignore_errors=True)
        os.makedirs(self.tmp)

    def one(self, link, set_name, manifest, peer, run_no, cold=None, prefault=None):
        """One transfer. cold / prefault: this run's cache state and prefault step (default:
        --cold and --no-prefault). link is the row label; a variant other than the options'
        is named in it (", cold", ", no prefault")."""
        a = self.a
        cold = a.cold if cold is None else cold
        prefault = a.prefault if prefault is None else prefault
        label = link + (", cold" if cold and not a.cold else "") + (", no prefault" if not prefault and a.prefault else "")
        self.port += 1
        tag = f"{label}-{set_name}-{peer.name}-{run_no}".replace(", ", "-").replace(" ", "_")
        self.clean_dst()
        os.sync()
        if cold:
            measure.drop_caches()
        # The settle pause doubles as a sample of what else the machine is doing: the CPU
        # figures are whole-machine, so a run started on a busy machine is flagged.
        bg = background_busy(a.settle) if a.settle > 0 else None
        waited, limit = 0.0, a.wait_quiet
        while bg is not None and bg > QUIET and waited < limit:
            # Other work on this (shared) machine: wait, bounded, for a quiet second.
            bg = background_busy(1.0)
            waited += 1.0
        if waited:
            log(f"waited {waited:.0f} s for a quiet machine (now {100 * bg:.0f}% busy)")
        if not cold:
            # Warm means warm for every tool: see measure.warm_source (this VM pages out idle
            # page cache after ~30 s).
            measure.warm_source(os.path.join(a.data, set_name))
        rec_pf = 0
        if prefault:
            # dst pages, plus the sender's page cache when it has just been dropped.
            # At full size that would exceed memory (useless: only memory is being touched) and
            # the free disk (the scratch file is written before the transfer and deleted).
            want = manifest["bytes"] * (2 if cold else 1) + (256 << 20)
            cap = min(mem_available() - (1 << 30), shutil.disk_usage(a.work).free - (2 << 30))
            rec_pf = max(0, min(want, cap))
            measure.prefault(os.path.join(a.work, "prefault.tmp"), rec_pf)
        v = {"src": os.path.join(a.data, set_name), "dst": self.dst, "set": set_name,
             "host": self.ns["IP_RCV"], "port": self.port, "bytes": manifest["bytes"],
             "work": self.tmp, "url": ""}
        env = dict(os.environ, SB_WORK=self.tmp, SB_DST=self.dst, SB_BYTES=str(manifest["bytes"]),
                   SB_SLUICE=a.sluice, SB_TOKEN=f"bench{self.port}", SB_SET=set_name, SB_SRC=v["src"])
        if a.wdt:
            env["SB_WDT"] = a.wdt
        if a.streams:
            env["SB_STREAMS"] = str(a.streams)
        timeout = a.timeout or (60 + manifest["bytes"] / 20e6)
        rec = {"link": label, "set": set_name, "tool": peer.name, "run": run_no, "ok": False,
               "cold": cold, "prefault": prefault, "prefault_bytes": rec_pf if prefault else 0,
               "bytes": manifest["bytes"], "files": manifest["count"] if peer.tree else 0,
               "timeout_s": round(timeout, 1), "port": self.port, "background_busy_frac": bg,
               "waited_quiet_s": waited}
        lg = lambda side, s: os.path.join(self.logs, f"{tag}.{side}.{s}")  # noqa: E731
        # Peak RSS per side: GNU time's %M (wait4's ru_maxrss of the tool, forked from the small
        # time process: a figure taken from this Python's own children would start at its RSS,
        # since the peak survives fork and exec). A daemon's includes the children it reaped.
        rss = lambda side: ([TIME, "-f", "%M", "-o", lg(side, "rss")] if TIME else [])  # noqa: E731
        ip_ns = lambda side: ["ip", "netns", "exec", self.ns["NS_SND" if side == "snd" else "NS_RCV"]] + rss(  # noqa: E731
            "send" if side == "snd" else "recv")
        recv = send = None
        try:
            if peer.local:
                recv = measure.Proc(["true"], lg("recv", "out"), lg("recv", "err"))
                recv.wait(time.monotonic() + 10)
            else:
                recv = measure.Proc(ip_ns("rcv") + peer.recv_argv(v), lg("recv", "out"), lg("recv", "err"),
                                env=env, cwd=REPO)
            start_deadline = time.monotonic() + 30
            if peer.local:
                pass
            elif not peer.script and not peer.url and "{port}" not in peer.recv_t:
                time.sleep(1.0)  # nothing to watch for: give the receiver a second
            elif peer.url:
                v["url"] = recv.first_line(start_deadline) or ""
                if not v["url"]:
                    raise RuntimeError("receiver printed no URL line")
            elif not measure.wait_listening(self.ns["NS_RCV"], self.port, recv, start_deadline):
                raise RuntimeError(f"receiver not listening on port {self.port} (rc={recv.rc})")
            busy0, proc0, t0 = measure.machine_busy_s(), measure.children_cpu_s(), time.monotonic()
            send = measure.Proc(ip_ns("snd") + peer.send_argv(v), lg("send", "out"), lg("send", "err"),
                                env=env, cwd=REPO)
            deadline = t0 + timeout
            if not wait_first_failure_or_sender(send, recv, deadline):
                raise RuntimeError(f"timeout after {timeout:.0f} s (sender still running)")
            if send.rc is None:
                raise RuntimeError(f"receiver failed rc={recv.rc} while sending")
            if send.rc != 0:
                raise RuntimeError(f"sender failed rc={send.rc}")
            if peer.exits:
                if not wait_all([recv], deadline):
                    raise RuntimeError(f"timeout after {timeout:.0f} s (receiver still running)")
                if recv.rc != 0:
                    raise RuntimeError(f"receiver failed rc={recv.rc}")
                t1 = max(send.end, recv.end)
            else:
                t1 = send.end
            busy1 = measure.machine_busy_s()
            if not peer.exits:
                # Let the daemon reap its per-connection children (their rusage) before stopping it.
                time.sleep(0.3)
                if TIME:
                    # Stop the daemon under GNU time, not time itself, so that time writes its
                    # RSS line; the group kill below is the backstop.
                    stop_children(recv.p.pid)
                    recv.wait(time.monotonic() + 5)
                recv.kill()
            proc1 = measure.children_cpu_s()
            secs = t1 - t0
            gb = manifest["bytes"] / 1e9
            rec.update(seconds=round(secs, 4), mb_s=round(manifest["bytes"] / 1e6 / secs, 1),
                       files_s=round(rec["files"] / secs, 1) if peer.tree else None,
                       cpu_machine_s=round(busy1 - busy0, 2),
                       cpu_s_per_gb=round((busy1 - busy0) / gb, 3),
                       cpu_proc_s=round(proc1 - proc0, 2),
                       cpu_proc_s_per_gb=round((proc1 - proc0) / gb, 3))
            if peer.name == "iperf3":
                try:
                    with open(lg("send", "out")) as f:
                        e = json.load(f)["end"]
                    rec["iperf3_own_mb_s"] = round(e["sum_received"]["bits_per_second"] / 8e6, 1)
                except (OSError, ValueError, KeyError):
                    pass
            for side in ("send", "recv"):
                kb = read_rss_kb(lg(side, "rss"))
                rec[f"rss_{side}_mib"] = round(kb / 1024, 1) if kb else None
            for side, p in (("send", send), ("recv", recv)):
                st = p.last_json_line()
                if st is not None and peer.name != "iperf3":
                    rec[f"stats_{side}"] = st
            if peer.tree:
                problems = verify.compare(manifest, self.dst)
                rec["verified"] = not problems
                if problems:
                    rec["verify_problems"] = problems
                    raise RuntimeError("received tree differs: " + "; ".join(problems[:5]))
            rec["ok"] = True
        except (RuntimeError, OSError) as e:
            rec["error"] = str(e)
            self.failures.append(f"{tag}: {e}")
            log(f"FAIL {tag}: {e} (logs: {lg('*', '*')})")
        finally:
            for p in (send, recv):
                if p:
                    p.close()
            kill_leftovers([self.ns["NS_SND"], self.ns["NS_RCV"]])
            self.trash.put(self.dst, manifest["bytes"])
        if rec["ok"]:
            log(f"{tag}: {rec['mb_s']} MB/s, {rec['seconds']} s, CPU {rec['cpu_s_per_gb']} s/GB"
                + (", verified" if peer.tree else ""))
        self.runs.append(rec)
        return rec
