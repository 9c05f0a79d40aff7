#!/usr/bin/env bash
# Peer: rsync client into an rsync daemon (module m = DST), whole files, no ssh.
set -euo pipefail
case $1 in
  kind) echo "exits=0 url=0 tree=1" ;;
  recv)
    conf=${SB_WORK:?}/rsyncd.conf
    cat >"$conf" <<CONF
pid file = ${SB_WORK}/rsyncd.pid
use chroot = false
[m]
  path = $2
  read only = false
  uid = 0
  gid = 0
CONF
    exec rsync --daemon --no-detach --config="$conf" --address="$3" --port="$4" ;;
  # No trailing slash on SRC: the tree lands as m/NAME.
  send) exec rsync -a --whole-file "$2" "rsync://$3:$4/m/" ;;
esac
