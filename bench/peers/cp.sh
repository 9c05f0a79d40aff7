#!/usr/bin/env bash
# Reference, not a peer: `cp -r` of the set into the receive directory on this machine, no
# network. It is the ceiling the page cache and file system put on every receiver here.
set -euo pipefail
case $1 in
  kind) echo "exits=1 url=0 tree=1 local=1" ;;
  send) exec cp -r "$2" "${SB_DST:?}/" ;;
esac
