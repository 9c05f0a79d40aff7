#!/usr/bin/env bash
# Two network namespaces joined by a veth pair: the bench's only network.
#
#   netns.sh up [RATE]     create (or re-create) both namespaces; RATE e.g. 1gbit adds tbf
#   netns.sh rate RATE     set the link rate on both veth ends (tbf); "none" removes the limit
#   netns.sh down          delete both namespaces (the veth pair goes with them)
#   netns.sh exec snd|rcv CMD...   run CMD inside one namespace
#   netns.sh show          addresses and qdiscs, for the record
#
# Addresses are private and exist only inside these namespaces; nothing else is reachable.
# Callers tear down with a trap (see bench/wdt-report/run); `down` is safe to run twice.
# Environment overrides: SB_NS_SND, SB_NS_RCV, SB_IP_SND, SB_IP_RCV, SB_MTU, SB_TBF_BURST.
set -euo pipefail

NS_SND=${SB_NS_SND:-sluice-bench-snd}
NS_RCV=${SB_NS_RCV:-sluice-bench-rcv}
IP_SND=${SB_IP_SND:-10.213.7.1}
IP_RCV=${SB_IP_RCV:-10.213.7.2}
MTU=${SB_MTU:-1500}
# tbf bucket: must hold a full GSO packet (64 KiB) or tbf splits/drops them; 256 KiB is ~2 ms
# at 1 Gbit/s, well below any transfer's length.
BURST=${SB_TBF_BURST:-256kb}
DEV_SND=sbveth-snd
DEV_RCV=sbveth-rcv

down() {
  # Processes left inside our namespaces (a daemon that outlived its run) keep them alive.
  local ns pids
  for ns in "$NS_SND" "$NS_RCV"; do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [[ -z $pids ]] || kill -KILL $pids 2>/dev/null || true
  done
  ip netns del "$NS_SND" 2>/dev/null || true
  ip netns del "$NS_RCV" 2>/dev/null || true
}

set_rate() {
  local rate=$1 ns dev
  for pair in "$NS_SND:$DEV_SND" "$NS_RCV:$DEV_RCV"; do
    ns=${pair%%:*} dev=${pair#*:}
    if [[ $rate == none || $rate == unbounded ]]; then
      ip -n "$ns" link show "$dev" >/dev/null
      tc -n "$ns" qdisc del dev "$dev" root 2>/dev/null || true
    else
      tc -n "$ns" qdisc replace dev "$dev" root tbf rate "$rate" burst "$BURST" latency 20ms
    fi
  done
}

up() {
  down
  ip netns add "$NS_SND"
  ip netns add "$NS_RCV"
  ip link add "$DEV_SND" netns "$NS_SND" mtu "$MTU" type veth peer name "$DEV_RCV" netns "$NS_RCV" mtu "$MTU"
  ip -n "$NS_SND" addr add "$IP_SND/24" dev "$DEV_SND"
  ip -n "$NS_RCV" addr add "$IP_RCV/24" dev "$DEV_RCV"
  for ns in "$NS_SND" "$NS_RCV"; do ip -n "$ns" link set lo up; done
  ip -n "$NS_SND" link set "$DEV_SND" up
  ip -n "$NS_RCV" link set "$DEV_RCV" up
  [[ ${1:-none} == none ]] || set_rate "$1"
  # Bounded wait for both ends to report carrier (veth is up at once; this is a guard).
  for _ in $(seq 50); do
    if ip -n "$NS_SND" link show "$DEV_SND" | grep -q LOWER_UP &&
       ip -n "$NS_RCV" link show "$DEV_RCV" | grep -q LOWER_UP; then
      return 0
    fi
    sleep 0.1
  done
  echo "netns: veth $DEV_SND/$DEV_RCV did not come up" >&2
  return 1
}

ns_of() {
  case $1 in
    snd) echo "$NS_SND" ;;
    rcv) echo "$NS_RCV" ;;
    *) echo "netns: side must be snd or rcv" >&2; return 2 ;;
  esac
}

case ${1:-} in
  up) shift; up "${1:-none}" ;;
  down) down ;;
  rate) set_rate "${2:?rate}" ;;
  exec) ns=$(ns_of "${2:?side}"); shift 2; exec ip netns exec "$ns" "$@" ;;
  show)
    for ns in "$NS_SND" "$NS_RCV"; do
      echo "== $ns"; ip -n "$ns" -br addr; tc -n "$ns" qdisc show
    done ;;
  env) echo "NS_SND=$NS_SND NS_RCV=$NS_RCV IP_SND=$IP_SND IP_RCV=$IP_RCV" ;;
  *) sed -n '2,12p' "$0" >&2; exit 2 ;;
esac
