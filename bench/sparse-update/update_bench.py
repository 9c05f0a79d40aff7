"""run.py update: a 4 GiB file with 1% of its 8 MiB blocks rewritten, sluice beside rsync's delta
transfer (see run.py)."""
import os
import shutil
import subprocess
import time

from common import GiB, MiB, Net, RsyncDaemon, read_all, same_bytes, sluice_run, rsync_run, summarize


def rewrite_blocks(path, count, block, seed):
    import random
    rng = random.Random(seed)
    size = os.path.getsize(path)
    picks = rng.sample(range(size // block), count)
    with open(path, "r+b") as f:
        for b in picks:
            f.seek(b * block)
            f.write(rng.randbytes(block))
    return picks


def bench_update(data, rounds, src_dir=None, rsync_inplace=False, rate=None, reflink_source=False):
    src_dir = src_dir or os.path.join(data, "update-src")
    os.makedirs(src_dir, exist_ok=True)
    full_src = src = os.path.join(src_dir, "big.bin")
    if not os.path.exists(src) or os.path.getsize(src) != 4 * GiB:
        subprocess.run(["dd", "if=/dev/urandom", f"of={src}", "bs=8M", "count=512", "status=none"], check=True)
    dest_root = os.path.join(data, "update-dest")
    cache = os.path.join(data, "sums-cache")
    reflinked = os.path.join(data, "update-src-reflink")
    net = Net(rate)
    daemon = RsyncDaemon(data, net)
    rsync_args = ["-a", "--no-whole-file"] + (["--inplace"] if rsync_inplace else [])
    rows = {"sluice full send": [], "sluice update": [], "sluice update (no cache)": [], "rsync " + " ".join(rsync_args[1:]): []}
    rsync_name = list(rows)[-1]
    # A new seed per run: the source file is kept between runs, and blocks rewritten with a seed
    # an earlier run used would rewrite the same bytes (no change to send).
    seed = first_seed = int(time.time())
    try:
        for r in range(rounds):
            shutil.rmtree(dest_root, ignore_errors=True)
            shutil.rmtree(cache, ignore_errors=True)
            shutil.rmtree(reflinked, ignore_errors=True)
            os.makedirs(dest_root)
            read_all(full_src)
            secs, s, rx = sluice_run(full_src, dest_root, recv_args=("--sums-cache", cache), net=net)
            rows["sluice full send"].append({"seconds": secs, "bytes_sent": s["bytes_sent"],
                                             "sums_stored": rx.get("files_sums_stored")})
            if reflink_source:
                os.makedirs(reflinked)
                src = os.path.join(reflinked, "big.bin")
                subprocess.run(["cp", "--reflink=always", "-p", os.path.join(dest_root, "big.bin"), src], check=True)
            # The cached update right after the send that stored the sums; the other two after it,
            # alternating (each replaces the file, so the entry no longer fits it afterwards).
            order = ["sluice update (no cache)", rsync_name]
            if r % 2:
                order.reverse()
            for tool in ["sluice update"] + order:
                seed += 1
                rewrite_blocks(src, 5, 8 * MiB, seed)
                read_all(src)
                got = os.path.join(dest_root, "big.bin")
                read_all(got)
                row = {}
                if tool.startswith("sluice"):
                    cache_args = ("--no-sums-cache",) if tool.endswith("(no cache)") else ("--sums-cache", cache)
                    secs, s, rx = sluice_run(src, dest_root, recv_args=cache_args, net=net)
                    row = {"bytes_sent": s["bytes_sent"], "fallbacks": rx.get("fallbacks", []),
                           "sums_cached": rx.get("files_sums_cached"), "sums_hashed": rx.get("files_sums_hashed"),
                           "sender_seconds": s.get("seconds"), "receiver_seconds": rx.get("seconds")}
                else:
                    secs = rsync_run(daemon, src, "update-dest", *rsync_args)
                row.update(seconds=secs, equal=same_bytes(src, got))
                rows[tool].append(row)
    finally:
        daemon.stop()
        net.down()
        shutil.rmtree(dest_root, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(reflinked, ignore_errors=True)
    res = summarize(rows, {"file": "4 GiB, 5 of 512 8 MiB blocks rewritten per update", "net": rate or "loopback",
                           "full send from": src_dir, "updates from": reflinked if reflink_source else src_dir,
                           "rsync": rsync_args, "first_seed": first_seed})
    for tool in ("sluice update", "sluice update (no cache)"):
        res["tools"][tool]["sums_cached"] = [x.get("sums_cached") for x in rows[tool]]
        res["tools"][tool]["sums_hashed"] = [x.get("sums_hashed") for x in rows[tool]]
    med = {t: v["median_seconds"] for t, v in res["tools"].items()}
    res["ratios"] = {"full send / update": med["sluice full send"] / med["sluice update"],
                     "rsync / update": med[rsync_name] / med["sluice update"],
                     "update (no cache) / update": med["sluice update (no cache)"] / med["sluice update"]}
    return res
