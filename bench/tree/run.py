#!/usr/bin/env python3
"""Issue 17's tree benches, sluice beside rsync in the same run (root; loopback):

  links     the WDT-report "mixed" set (hard links to small/ and minor/, bench/datasets/gen.py)
            sent with small/ and minor/: bytes over the wire and bytes allocated on the
            receiver, sluice send vs rsync -aH
  fidelity  a generated tree of every odd kind (odd_tree.py) sent by sluice send and by
            rsync -aHAXS, the two results compared (compare.py); then the tree changed
            (odd_tree.mutate: entries of another kind, removals, a split hard-link group)
            sent again by both with --delete and compared again ("update")

usage: run.py --data DIR [--scale 1/64] [--only links|fidelity] [--sluice BIN] [--out FILE.json]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402
import odd_tree  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))


def allocated(path):
    return int(subprocess.run(["du", "-s", "-B1", path], capture_output=True, text=True, check=True).stdout.split()[0])


def sluice_send(sluice, sources, dest, *send_args, existing=False):
    os.makedirs(dest, exist_ok=existing)
    rx = subprocess.Popen([sluice, "recv", dest, "--bind", "127.0.0.1", "--token", "bench", "--json"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = rx.stdout.readline().strip()
    t0 = time.monotonic()
    s = subprocess.run([sluice, "send", *sources, url, "--json", *send_args], capture_output=True, text=True, timeout=600)
    out, err = rx.communicate(timeout=600)
    secs = time.monotonic() - t0
    if s.returncode or rx.returncode:
        raise SystemExit(f"sluice failed: {s.stderr} {err}")
    return json.loads(s.stdout.splitlines()[-1]), json.loads(out.splitlines()[-1]), secs, err


def rsync(sources, dest, *flags, existing=False):
    os.makedirs(dest, exist_ok=existing)
    t0 = time.monotonic()
    r = subprocess.run(["rsync", *flags, "--stats", *sources, dest + "/"], capture_output=True, text=True, timeout=600)
    secs = time.monotonic() - t0
    if r.returncode:
        raise SystemExit(f"rsync failed: {r.stderr}")
    sent = int(re.search(r"Total bytes sent: ([\d,]+)", r.stdout).group(1).replace(",", ""))
    return sent, secs


def links(a, sluice):
    sets = os.path.join(a.data, "sets")
    subprocess.run([sys.executable, os.path.join(REPO, "bench/datasets/gen.py"), "--out", sets, "--scale", a.scale,
                    "--sets", "mixed"], check=True)
    sources = [os.path.join(sets, n) for n in ("small", "minor", "mixed")]
    src_bytes = sum(os.path.getsize(os.path.join(d, f)) for s in sources for d, _, fs in os.walk(s) for f in fs)
    one_copy = sum(os.path.getsize(os.path.join(d, f)) for s in sources[:2] for d, _, fs in os.walk(s) for f in fs)
    res = {"scale": a.scale, "bytes_by_name": src_bytes, "bytes_one_copy": one_copy}
    for name, fn in [("sluice", lambda d: sluice_send(sluice, sources, d)), ("rsync -aH", lambda d: rsync(sources, d, "-aH"))]:
        dest = os.path.join(a.data, "rx-links")
        shutil.rmtree(dest, ignore_errors=True)
        subprocess.run(["sync"])
        got = fn(dest)
        if name == "sluice":
            s, r, secs, _ = got
            wire = s["bytes_sent"]
        else:
            wire, secs = got
        res[name] = {"wire_bytes": wire, "allocated_bytes": allocated(dest), "seconds": round(secs, 2),
                     "link_groups": len(compare.groups(compare.entries(dest)))}
        shutil.rmtree(dest)
    return res


def fidelity(a, sluice):
    src = os.path.join(a.data, "odd")
    shutil.rmtree(src, ignore_errors=True)
    odd_tree.make(src)
    change = odd_tree.mutate(src)
    out = {}
    a_dir, b_dir = os.path.join(a.data, "fid-sluice"), os.path.join(a.data, "fid-rsync")
    for d in (a_dir, b_dir):
        shutil.rmtree(d, ignore_errors=True)
    s, r, secs, err = sluice_send(sluice, [src], a_dir)
    out["sluice_warnings"] = [l for l in err.splitlines() if "warning" in l]
    rsync([src], b_dir, "-aHAXS")
    c = compare.compare(os.path.join(a_dir, "odd"), os.path.join(b_dir, "odd"))
    c["source_vs_sluice"] = compare.compare(src, os.path.join(a_dir, "odd"))["differences"]
    out.update(c)
    # The update round: the source changed (entries of another kind, removals, a split hard-link
    # group), sent again with --delete by both into what they made, compared again.
    change()
    s, r, secs, err = sluice_send(sluice, [src], a_dir, "--delete", existing=True)
    rsync([src], b_dir, "-aHAXS", "--delete", existing=True)
    u = compare.compare(os.path.join(a_dir, "odd"), os.path.join(b_dir, "odd"))
    u["source_vs_sluice"] = compare.compare(src, os.path.join(a_dir, "odd"))["differences"]
    u["sluice_warnings"] = [l for l in err.splitlines() if "warning" in l]
    out["update"] = u
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--scale", default="1/64")
    ap.add_argument("--only", choices=["links", "fidelity"])
    ap.add_argument("--sluice", default=os.path.join(REPO, "build/tools/sluice"))
    ap.add_argument("--out")
    a = ap.parse_args()
    res = {}
    if a.only in (None, "fidelity"):
        res["fidelity"] = fidelity(a, a.sluice)
    if a.only in (None, "links"):
        res["links"] = links(a, a.sluice)
    text = json.dumps(res, indent=1, default=str)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
