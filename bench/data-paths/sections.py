"""The sections of the data-paths bench (run.py): each sec_NAME method runs one section (see
run.py's docstring) from the runs of runner.Runner."""
import statistics
import subprocess

from runner import RECV_PATHS, SEND_PATHS, Runner, parse_size, trace_row


class Bench(Runner):
    def sec_goals(self):
        """The issue's two goals, interleaved over --goal-rounds: the default sender into the
        discard sink vs iperf3 -Z -F, and the default file-to-file transfer vs nc."""
        ds = self.a.default_streams
        runs = [("sluice", "null"), ("peer", "iperf3 -Z -F FILE", 1), ("peer", "iperf3 -Z -F FILE", ds),
                ("sluice", None), ("peer", "nc -> file", 1)]
        for r in range(self.a.goal_rounds):
            for run in (runs if r % 2 == 0 else runs[::-1]):
                if run[0] == "sluice":
                    self.run_sluice("goals", None, run[1], ds)
                else:
                    self.run_peer("goals", run[1], run[2])

    def sec_streams(self):
        """The default stream count's measurement: default paths file-to-file at each stream
        count and at 1/4/8x the default block size, --goal-rounds rounds interleaved."""
        runs = [(st, None) for st in self.a.streams] + [(self.a.default_streams, b) for b in ("2M", "32M")]
        for r in range(self.a.goal_rounds):
            for st, b in (runs if r % 2 == 0 else runs[::-1]):
                self.run_sluice("streams", None, None, st, block=b)

    def sec_send(self):
        for r in range(self.a.rounds):
            for streams in self.a.streams:
                runs = [("sluice", p) for p in SEND_PATHS] + [("peer", "iperf3 -Z -F FILE"), ("peer", "iperf3 -F FILE")]
                if streams == 1:
                    runs.append(("peer", "nc -> /dev/null"))
                for kind, what in (runs if r % 2 == 0 else runs[::-1]):
                    if kind == "sluice":
                        self.run_sluice("send", what, "null", streams)
                    else:
                        self.run_peer("send", what, streams)

    def fastest_sender(self):
        if self.a.fast_sender:
            return self.a.fast_sender
        rows = [x for x in self.results if x["section"] == "send" and x["name"].startswith("sluice")]
        if not rows:
            return "splice"
        best = {}
        for x in rows:
            best.setdefault(x["send_path"], []).append(x["mb_s"])
        return max(best, key=lambda p: statistics.median(best[p]))

    def sec_recv(self):
        fast = self.fastest_sender()
        for r in range(self.a.rounds):
            for streams in self.a.streams:
                runs = [("sluice", p) for p in RECV_PATHS] + ([("peer", "nc -> file")] if streams == 1 else [])
                for kind, what in (runs if r % 2 == 0 else runs[::-1]):
                    if kind == "sluice":
                        self.run_sluice("recv", fast, what, streams)
                    else:
                        self.run_peer("recv", what, 1)

    def sec_combo(self):
        for r in range(self.a.rounds):
            runs = [(s, p) for s in SEND_PATHS for p in RECV_PATHS] + [(None, None), ("peer", "nc -> file")]
            for s, p in (runs if r % 2 == 0 else runs[::-1]):
                if s == "peer":
                    self.run_peer("combo", p, 1)
                else:
                    self.run_sluice("combo", s, p, self.a.default_streams)

    def sec_cold(self):
        size = parse_size(self.a.cold_size)
        self.run_size = size
        self.source()
        runs = [("sluice", p, "null") for p in SEND_PATHS] + [("sluice", None, None), ("peer", "iperf3 -Z -F FILE", None),
                                                                ("peer", "nc -> /dev/null", None), ("peer", "nc -> file", None)]
        for r in range(self.a.rounds):
            for kind, what, rp in (runs if r % 2 == 0 else runs[::-1]):
                if kind == "sluice" and rp is None:
                    self.clean_dst()
                self.drop_caches()
                if kind == "sluice":
                    self.run_sluice("cold", what, rp, self.a.default_streams, size=size)
                else:
                    self.run_peer("cold", what, self.a.default_streams if what.startswith("iperf3") else 1, size=size)
        self.warm()

    def sec_memory(self):
        size = parse_size(self.a.memory_size)
        for streams in self.a.memory_streams:
            for block in self.a.memory_blocks:
                self.run_sluice("memory", None, None, streams, block=block, size=size)

    def default_paths(self):
        """The paths the defaults ran, from a default run's stats (else from --help)."""
        for r in self.results:
            if r["name"] == "sluice default -> default" and "send_path" in r:
                return r["send_path"], r["recv_path"]
        tx = subprocess.run([self.sluice, "send", "--help"], capture_output=True, text=True).stdout
        rx = subprocess.run([self.sluice, "recv", "--help"], capture_output=True, text=True).stdout
        pick = lambda text, names: next(n for n in names if f"{n} (default" in text)
        return pick(tx, SEND_PATHS), pick(rx, RECV_PATHS)

    def sec_trace(self):
        size = parse_size(self.a.trace_size)
        self.run_size = size
        self.source()
        subprocess.run(["cat", self.source()], stdout=subprocess.DEVNULL, check=True)
        tdir = self.out / "traces"
        tdir.mkdir(exist_ok=True)
        confs = [(p, "null") for p in SEND_PATHS] + [(self.fastest_sender(), p) for p in RECV_PATHS] + [(None, None)]
        for s, p in confs:
            if p != "null":
                self.clean_dst()
            tag = f"sluice-{s or 'default'}-{p or 'default'}"
            self.run_size = size
            t = str(tdir / tag)
            self.pair(self.sluice_recv(p), self.sluice_send(s, self.a.default_streams), True, trace=t)
            ds, dr = self.default_paths()
            row = trace_row(f"sluice {s or 'default'} -> {p or 'default'}", t, size,
                            o_direct_send=(s or ds) == "zc", o_direct_recv=(p or dr) == "direct")
            self.results.append(row)
        for name in ("iperf3 -Z -F FILE", "iperf3 -F FILE", "nc -> /dev/null", "nc -> file"):
            if name == "nc -> file":
                self.clean_dst()
            self.run_size = size
            rx, tx = self.peer(name, 1)
            t = str(tdir / name.replace(" ", "_").replace("/", "_"))
            self.pair(rx, tx, False, trace=t)
            self.results.append(trace_row(name, t, size, False, False))
        self.clean_dst()
