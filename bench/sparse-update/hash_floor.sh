#!/bin/bash
# The floor of an update's sender: read + XXH3 of each cached FILE (4 GiB in docs/benchmarks.md,
# "Issue 17 (h17i, session 14)"), every way hash_floor.cpp knows, on 1 and 2 threads.
#   bench-lock timeout 470 bench/sparse-update/hash_floor.sh FILE...
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
g++ -O3 -march=native -std=c++20 "$here/hash_floor.cpp" -o "$bin/hf" -lpthread
g++ -O3 -mavx2 -std=c++20 "$here/hash_floor.cpp" -o "$bin/hf-avx2" -lpthread
for F in "$@"; do
  echo "== $F ($(stat -f -c %T "$F"))"
  cat "$F" > /dev/null; cat "$F" > /dev/null
  for t in 1 2; do
    for how in pread populate fault whole; do "$bin/hf" "$F" $how $t; done
    CHUNK=65536 "$bin/hf" "$F" pread $t | sed 's/pread /pread64K/'
    CHUNK=262144 "$bin/hf" "$F" pread $t | sed 's/pread /pread256K/'
    "$bin/hf-avx2" "$F" pread $t | sed 's/pread /preadAVX2/'
  done
  "$bin/hf" "$F" memonly 1; "$bin/hf" "$F" memonly 2
done
