#!/usr/bin/env bash
# Peer: iperf3 memory to memory, the link's figure. Moves SB_BYTES bytes, writes no tree.
# Interface of every peer script: see README.md in this directory.
set -euo pipefail
case $1 in
  kind) echo "exits=1 url=0 tree=0" ;;
  recv) exec iperf3 -s -1 -B "$3" -p "$4" ;;
  send) exec iperf3 -c "$3" -p "$4" -n "${SB_BYTES:?}" -J ;;
esac
