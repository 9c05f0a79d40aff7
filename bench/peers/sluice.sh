#!/usr/bin/env bash
# Peer: sluice itself, by its CLI contract (docs/bench-wdt-report.md):
#   sluice recv DIR --port P --bind ADDR --token T --json   first stdout line: sluice://H:P/?token=T
#   sluice send SRC URL --streams N --json                   last stdout line: JSON stats
# SB_SLUICE names the binary (default build/tools/sluice), SB_STREAMS the stream count.
set -euo pipefail
bin=${SB_SLUICE:-build/tools/sluice}
case $1 in
  kind) echo "exits=1 url=1 tree=1" ;;
  recv) exec "$bin" recv "$2" --port "$4" --bind "$3" --token "${SB_TOKEN:-bench}" --json ;;
  send)
    streams=()
    [[ -z ${SB_STREAMS:-} ]] || streams=(--streams "$SB_STREAMS")
    exec "$bin" send "$2" "${5:?url}" "${streams[@]}" --json ;;
esac
