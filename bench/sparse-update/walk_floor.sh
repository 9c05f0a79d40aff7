#!/bin/bash
# The floor of a no-change update of a tree on this machine (docs/benchmarks.md, "Issue 17
# (h17j, session 14)"): the bare walk of the source and of the destination (walk_floor.cpp),
# and a sluice process's start and exit (`sluice --version`).
#   SLUICE_BIN=... bench-lock timeout 470 bench/sparse-update/walk_floor.sh ROUNDS SRC DEST
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
g++ -O2 -std=c++20 "$here/walk_floor.cpp" -o "$bin/wf"
rounds=$1
shift
"$bin/wf" "$rounds" "$@"
sluice=${SLUICE_BIN:-sluice}
python3 - "$sluice" "$rounds" <<'PY'
import statistics, subprocess, sys, time
ms = []
for _ in range(int(sys.argv[2])):
    t0 = time.monotonic()
    subprocess.run([sys.argv[1], "--version"], check=True, capture_output=True)
    ms.append((time.monotonic() - t0) * 1000)
print(f"{sys.argv[1]} --version (exec, start, exit):", " ".join(f"{m:.1f}" for m in ms), f"ms; median {statistics.median(ms):.1f} ms")
PY
