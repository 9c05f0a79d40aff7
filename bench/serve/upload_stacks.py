#!/usr/bin/env python3
"""Where a one-thread `sluice serve` waits while `ab -k -c 10` PUTs one name (issue 15's upload
goal): sluice on CPU 0 and ab on CPU 1 over loopback, each in a session of its own, and every
2 ms the kernel stack (/proc/PID/task/TID/stack) and state of each server thread. Prints ab's
rate, how often each thread was running (R), sleeping (S) or waiting for the disk (D), and the
commonest stacks (top 7 frames) of samples not idle in the ring's or a pool's wait.
  /work/brief/bin/bench-lock python3 bench/serve/upload_stacks.py SLUICE DATA_DIR SECONDS
DATA_DIR is made and left (a 1 KB body and the stored file); delete it after."""
import collections
import subprocess
import sys
import time
from pathlib import Path

IDLE = ("io_cqring_wait", "futex", "sigtimedwait")  # a ring or pool thread with nothing to do


def main():
    binary, data, seconds = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    www = data / "www"
    www.mkdir(parents=True, exist_ok=True)
    body = data / "body"
    body.write_bytes(b"x" * 1024)
    port, auth = 18600, ["-H", "Authorization: Bearer tk"]
    srv = subprocess.Popen(["taskset", "-c", "0", "setsid", binary, "serve", str(www), "--http", str(port), "--bind",
                            "127.0.0.1", "--threads", "1", "--allow-upload", "--token", "tk"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.7)
        url = f"http://127.0.0.1:{port}/u.bin"
        subprocess.run(["curl", "-s", "-o", "/dev/null", "--max-time", "10", "-T", str(body), *auth, url], check=True)
        tids = [t.name for t in Path(f"/proc/{srv.pid}/task").iterdir()]
        ab = subprocess.Popen(["taskset", "-c", "1", "setsid", "ab", "-q", "-k", "-c", "10", "-t", str(seconds), "-n",
                               "5000000", "-u", str(body), "-T", "application/octet-stream", *auth, url],
                              stdout=subprocess.PIPE, text=True)
        states, stacks = collections.Counter(), collections.Counter()
        time.sleep(0.3)
        end = time.monotonic() + seconds - 0.8
        while time.monotonic() < end:
            for tid in tids:
                task = Path(f"/proc/{srv.pid}/task/{tid}")
                try:
                    st = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
                    frames = [ln.split()[1].split("+")[0] for ln in (task / "stack").read_text().splitlines()]
                except OSError:
                    continue
                states[(tid, st)] += 1
                if st == "D" or (st == "S" and not any(i in " ".join(frames[:3]) for i in IDLE)):
                    stacks[(st, " < ".join(frames[:7]))] += 1
            time.sleep(0.002)
        out = ab.communicate(timeout=seconds + 60)[0]
    finally:
        srv.terminate()
        srv.wait(timeout=30)
    print(*[ln for ln in out.splitlines() if ln.startswith(("Complete requests", "Requests per second"))], sep="\n")
    for (tid, st), n in sorted(states.items()):
        print(f"thread {tid} {st}: {n}")
    for (st, stack), n in stacks.most_common(10):
        print(f"{n:6d} {st} {stack}")


if __name__ == "__main__":
    main()
