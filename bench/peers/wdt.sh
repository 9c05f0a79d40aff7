#!/usr/bin/env bash
# Peer: WDT (github.com/facebook/wdt), built by bench/peers/wdt-build.sh. Its own defaults except
# encryption, off as for every other tool here (the WDT report measured it without, too):
#   wdt -directory DST/SET -start_port P -num_ports N -transfer_id T -encryption_type none
#   wdt -directory SRC -destination HOST -start_port P -num_ports N -transfer_id T -encryption_type none
# The receiver exits by itself after one transfer. WDT's defaults include what matters at full
# size: every file's pages are dropped once read or written (posix_fadvise DONTNEED, with
# sync_file_range every 0.5 MB on the receiver).
# SB_WDT names the binary (default: wdt on PATH, else /work/data/wdt/bin/wdt); SB_STREAMS the
# connection count (WDT's default 8 when unset or 0); SB_SET the set's name: the tree must
# arrive as DST/SET and WDT's receiver writes the sender's tree into its -directory.
set -euo pipefail
bin=${SB_WDT:-$(command -v wdt || echo /work/data/wdt/bin/wdt)}
streams=${SB_STREAMS:-0}
((streams > 0)) || streams=8
common=(-start_port "${4:-0}" -num_ports "$streams" -transfer_id "${SB_TOKEN:-bench}" -encryption_type none
  -ipv4 -treat_fewer_port_as_error)
case $1 in
  kind) echo "exits=1 url=0 tree=1" ;;
  recv)
    dir=$2/${SB_SET:-$(basename "${SB_SRC:?SB_SET or SB_SRC must name the set}")}
    mkdir -p "$dir"
    exec "$bin" -directory "$dir" "${common[@]}" ;;
  send) exec "$bin" -directory "$2" -destination "$3" "${common[@]}" ;;
esac
