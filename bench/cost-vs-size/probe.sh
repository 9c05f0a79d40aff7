#!/usr/bin/env bash
# One sluice transfer over loopback, cold, into a fresh directory, each side under GNU time and
# optionally perf: where the time goes (issue 19). Take the bench lock:
#   flock /run/sluice-bench.lock bench/cost-vs-size/probe.sh TAG SRC [perf] [-- SEND_ARGS...]
# Env: S (sluice binary, default build/tools/sluice), RARGS (extra recv args), OUT (default
# /tmp/sluice-probe), DST_PARENT (default /work/data/probe-dst, flagged TOPDIR).
# Output: OUT/TAG/summary (wall, machine CPU, user/sys/RSS/faults per side), the JSON stats of
# both sides, and with perf: OUT/TAG/{send,recv}.perf (perf report -i ... --no-children).
set -euo pipefail
tag=${1:?usage: probe.sh TAG SRC [perf] [-- SEND_ARGS...]}
src=${2:?SRC}
prof=${3:-none}
shift $(($# < 3 ? $# : 3))
[[ ${1:-} != -- ]] || shift
S=${S:-build/tools/sluice}
out=${OUT:-/tmp/sluice-probe}/$tag
parent=${DST_PARENT:-/work/data/probe-dst}
rm -rf "$out"
mkdir -p "$out" "$parent"
chattr +T "$parent" 2>/dev/null || true
dst=$parent/$tag-$(date +%s%N)
mkdir -p "$dst"
port=$((20000 + RANDOM % 20000))
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
sync
echo 3 >/proc/sys/vm/drop_caches
P=() PS=()
if [[ $prof == perf ]]; then
  P=(perf record -F 997 -g -o "$out/recv.perf" --)
  PS=(perf record -F 997 -g -o "$out/send.perf" --)
fi
# shellcheck disable=SC2086
/usr/bin/time -v -o "$out/recv.time" "${P[@]}" "$S" recv "$dst" --port "$port" --bind 127.0.0.1 --token T --json ${RARGS:-} \
  >"$out/recv.out" 2>"$out/recv.err" &
rp=$!
for _ in $(seq 200); do ss -Hltn "sport = :$port" | grep -q . && break; sleep 0.05; done
t0=$(date +%s.%N) b0=$(busy)
/usr/bin/time -v -o "$out/send.time" "${PS[@]}" "$S" send "$src" "sluice://127.0.0.1:$port/?token=T" --json "$@" \
  >"$out/send.out" 2>"$out/send.err" || echo "sender failed: $(tail -1 "$out/send.err")" >&2
wait $rp || echo "receiver failed: $(tail -1 "$out/recv.err")" >&2
t1=$(date +%s.%N) b1=$(busy)
echo "wall_s $(echo "$t1 - $t0" | bc) machine_cpu_s $(echo "($b1 - $b0) / $(getconf CLK_TCK)" | bc -l | cut -c1-6)" >"$out/summary"
for s in send recv; do
  grep -E "User time|System time|Maximum resident|Major|Minor|Voluntary|Involuntary" "$out/$s.time" | sed "s/^/$s /" >>"$out/summary"
done
cat "$out/summary"
rm -rf "$dst"
