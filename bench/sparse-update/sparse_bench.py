"""run.py sparse: a 4 GiB file holding 16 MiB of data, sluice beside rsync -S (see run.py)."""
import os
import shutil

from common import GiB, MiB, RsyncDaemon, read_all, same_bytes, sluice_run, rsync_run, summarize


def make_sparse(path, size, extents, seed):
    """`size` bytes with random data at `extents` [(offset, length)], holes elsewhere."""
    import random
    rng = random.Random(seed)
    with open(path, "wb") as f:
        f.truncate(size)
        for off, n in extents:
            f.seek(off)
            f.write(rng.randbytes(n))
    os.sync()


def bench_sparse(data, rounds):
    src_dir = os.path.join(data, "sparse-src")
    os.makedirs(src_dir, exist_ok=True)
    src = os.path.join(src_dir, "vm.img")
    extents = [(k * 256 * MiB + 12 * MiB, MiB) for k in range(16)]
    if not os.path.exists(src) or os.path.getsize(src) != 4 * GiB:
        make_sparse(src, 4 * GiB, extents, 17)
    dest_root = os.path.join(data, "sparse-dest")
    daemon = RsyncDaemon(data)
    rows = {"sluice": [], "rsync -a -S --whole-file": []}
    try:
        for r in range(rounds):
            order = list(rows) if r % 2 == 0 else list(reversed(rows))
            for tool in order:
                shutil.rmtree(dest_root, ignore_errors=True)
                os.makedirs(dest_root)
                read_all(src)
                if tool == "sluice":
                    secs, s, _ = sluice_run(src, dest_root)
                    sent = s["bytes_sent"]
                else:
                    secs = rsync_run(daemon, src, "sparse-dest", "-a", "-S", "--whole-file")
                    sent = None
                got = os.path.join(dest_root, "vm.img")
                rows[tool].append({"seconds": secs, "allocated": os.stat(got).st_blocks * 512,
                                   "equal": same_bytes(src, got), "bytes_sent": sent})
    finally:
        daemon.stop()
        shutil.rmtree(dest_root, ignore_errors=True)
    return summarize(rows, {"file": "4 GiB, 16 x 1 MiB of data", "src_allocated": os.stat(src).st_blocks * 512})
