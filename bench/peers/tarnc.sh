#!/usr/bin/env bash
# Peer: `tar cf - | nc` into `nc -l | tar xf -` (netcat-openbsd). One TCP stream, no checks.
set -euo pipefail
case $1 in
  kind) echo "exits=1 url=0 tree=1" ;;
  # recv DST HOST PORT: -d: never read stdin; nc exits at the sender's EOF, then tar.
  recv) set -o pipefail; nc -d -l -s "$3" -p "$4" | tar xf - -C "$2" ;;
  # send SRC HOST PORT: -N: shut the socket down at EOF so the receiver sees the end.
  send) tar cf - -C "$(dirname "$2")" "$(basename "$2")" | nc -N "$3" "$4" ;;
esac
