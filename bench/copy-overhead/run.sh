#!/usr/bin/env bash
# The copy-overhead reproduction (issue 3): on loopback, with a file in the page cache, send it
# four ways and measure each with hyperfine (throughput) and `sluice trace` (copies, CPU):
#   dd0   dd if=/dev/zero bs=1M count=N | nc          -> nc -l > /dev/null
#   ddf   dd if=FILE bs=1M | nc                       -> nc -l > /dev/null
#   nc    nc < FILE                                   -> nc -l > /dev/null
#   sluice  sluice send FILE URL                      -> sluice recv DIR --sink null
#   ddsl  dd if=FILE bs=1M | sluice send - URL        -> sluice recv --stdout > /dev/null
# Results go to bench/out/copy-overhead/ (git-ignored): ROW.send.json, ROW.recv.json (trace
# reports), ROW.hyperfine.json, and summary.md + copies.png made by report.py / plot.py.
#
# usage: bench/copy-overhead/run.sh [SIZE_MIB]      (default 1024; run as root: tracing needs it)
# env:   SLUICE=path/to/sluice (default build/tools/sluice), RUNS=hyperfine runs (default 5),
#        PORT=first loopback port (default 47100), ROWS="ddf ddsl" to run only some rows
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
size_mib=${1:-1024}
runs=${RUNS:-5}
port=${PORT:-47100}
sluice=${SLUICE:-$root/build/tools/sluice}
out=$root/bench/out/copy-overhead
file=$out/data.bin
step_timeout=300   # seconds; every transfer and trace is bounded by it

die() { echo "copy-overhead: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || die "tracing needs root"
for t in nc dd hyperfine python3 timeout; do command -v "$t" >/dev/null || die "missing $t"; done
[[ -x $sluice ]] || die "no sluice binary at $sluice (build it: meson setup build && ninja -C build)"
"$sluice" trace --help >/dev/null 2>&1 || die "$sluice was built without the tracer (needs clang, bpftool, libbpf-dev)"
mkdir -p "$out"

# Data: random bytes (so nothing compresses or dedups), generated here, never committed.
if [[ ! -f $file || $(stat -c %s "$file") -ne $((size_mib << 20)) ]]; then
  echo "copy-overhead: writing ${size_mib} MiB to $file" >&2
  head -c $((size_mib << 20)) /dev/urandom > "$file"
fi
cat "$file" > /dev/null   # into the page cache

# Can sluice's mover run here? (It may not exist yet when this bench is first run.)
have_mover=0
if "$sluice" send --help >/dev/null 2>&1 && "$sluice" recv --help >/dev/null 2>&1; then have_mover=1; fi

wait_port_free() {  # the previous receiver must be gone before the next one listens
  for _ in $(seq 100); do ss -Hltn "sport = :$1" | grep -q . || return 0; sleep 0.05; done
  die "port $1 still busy"
}
wait_listening() {
  for _ in $(seq 200); do ss -Hltn "sport = :$1" | grep -q . && return 0; sleep 0.05; done
  die "nothing listening on port $1"
}

# sender command per row (a shell snippet; $P is the port)
sender() {
  case $1 in
    dd0) echo "dd if=/dev/zero bs=1M count=$size_mib status=none | nc -N 127.0.0.1 \$P" ;;
    ddf) echo "dd if=$file bs=1M status=none | nc -N 127.0.0.1 \$P" ;;
    nc) echo "nc -N 127.0.0.1 \$P < $file" ;;
    sluice) echo "$sluice send $file \$(cat $out/url)" ;;
    ddsl) echo "dd if=$file bs=1M status=none | $sluice send - sluice://127.0.0.1:\$P/?token=copyoverhead" ;;
  esac
}
# receiver command per row; for sluice its first stdout line (the URL) goes to $out/url
receiver() {
  case $1 in
    sluice) echo "$sluice recv $out/recv-dir --bind 127.0.0.1 --port \$P --sink null | { head -1 > $out/url; cat > /dev/null; }" ;;
    ddsl) echo "$sluice recv --stdout \$P --bind 127.0.0.1 --token copyoverhead > /dev/null" ;;
    *) echo "nc -l 127.0.0.1 \$P > /dev/null" ;;
  esac
}

start_receiver() {  # row port -> background receiver, waits until it listens
  local row=$1 P=$2
  wait_port_free "$P"
  rm -f "$out/url"
  mkdir -p "$out/recv-dir"
  setsid timeout $step_timeout sh -c "P=$P; $(receiver "$row")" > /dev/null 2>&1 &
  wait_listening "$P"
  if [[ $row == sluice ]]; then for _ in $(seq 100); do [[ -s $out/url ]] && break; sleep 0.05; done; fi
}

rows=(dd0 ddf nc)
if ((have_mover)); then rows+=(sluice ddsl); else echo "copy-overhead: sluice send/recv not available: the sluice row is skipped" >&2; fi
if [[ -n ${ROWS:-} ]]; then read -ra rows <<< "$ROWS"; fi   # e.g. ROWS="ddf ddsl"

for row in "${rows[@]}"; do
  echo "copy-overhead: $row" >&2
  # 1. Throughput: hyperfine times the sender; a fresh receiver on a fresh port (a receiver may
  #    not rebind a port in TIME_WAIT) is started before each run; $out/port passes the port on.
  echo "$port" > "$out/port"
  hyperfine --shell bash --runs "$runs" --warmup 1 --export-json "$out/$row.hyperfine.json" --style basic \
    --prepare "$(declare -f wait_port_free wait_listening die start_receiver receiver); out=$out; sluice=$sluice; step_timeout=$step_timeout; P=\$((\$(cat $out/port) + 1)); echo \$P > $out/port; start_receiver $row \$P" \
    "P=\$(cat $out/port); $(sender "$row")" >&2
  port=$(( $(cat "$out/port") + 1 ))
  P=$((port++))

  # 2. Traces: one tracer on the receiver, one on the sender, both outside the timed runs.
  wait_port_free "$P"
  rm -f "$out/url"
  timeout $step_timeout "$sluice" trace --json -o "$out/$row.recv.json" -- sh -c "P=$P; $(receiver "$row")" &
  recv_pid=$!
  wait_listening "$P"
  if [[ $row == sluice ]]; then for _ in $(seq 100); do [[ -s $out/url ]] && break; sleep 0.05; done; fi
  timeout $step_timeout "$sluice" trace --json -o "$out/$row.send.json" -- sh -c "P=$P; $(sender "$row")"
  wait "$recv_pid"
done

# matplotlib only for the picture: installed here, not a build dependency.
python3 -c 'import matplotlib' 2>/dev/null || python3 -m pip install --quiet --user matplotlib || true
python3 "$here/report.py" "$out" "$size_mib" "${rows[@]}" > "$out/summary.md"
python3 "$here/plot.py" "$out" "${rows[@]}" || echo "copy-overhead: plot skipped (matplotlib missing?)" >&2
cat "$out/summary.md"
