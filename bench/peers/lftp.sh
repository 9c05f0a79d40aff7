#!/usr/bin/env bash
# Peer: lftp `mirror -R --parallel=8` into vsftpd, as the report ran it. vsftpd refuses root:
# setup creates the local user (SLUICE_BENCH_FTP_USER/PASS, default sluicebench).
set -euo pipefail
user=${SLUICE_BENCH_FTP_USER:-sluicebench}
pass=${SLUICE_BENCH_FTP_PASS:-sluicebench}
case $1 in
  kind) echo "exits=0 url=0 tree=1" ;;
  recv)
    chown "$user" "$2"
    conf=${SB_WORK:?}/vsftpd.conf
    cat >"$conf" <<CONF
listen=YES
listen_ipv6=NO
listen_address=$3
listen_port=$4
background=NO
anonymous_enable=NO
local_enable=YES
write_enable=YES
local_umask=022
seccomp_sandbox=NO
pam_service_name=vsftpd
secure_chroot_dir=/var/run/vsftpd/empty
xferlog_enable=NO
max_clients=0
max_per_ip=0
CONF
    exec vsftpd "$conf" ;;
  send)
    exec lftp -c "set ftp:ssl-allow no; set net:max-retries 2; set net:timeout 30;
      open -u $user,$pass -p $4 $3; mirror -R --parallel=${SB_PARALLEL:-8} $2 ${SB_DST:?}/$(basename "$2")" ;;
esac
