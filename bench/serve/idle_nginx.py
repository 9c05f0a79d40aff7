"""nginx beside `sluice serve` in bench/serve/idle.py (--peer-nginx): the issue's peer, tuned as
bench/serve/run.py tunes it (sendfile, tcp_nopush, open_file_cache, access_log off) without aio
threads (run.py's nginx-noaio: its faster setting for a cached 1 KB file; with them each
request crosses to a pool thread, ~2.7 context switches and twice sluice's CPU per request),
with K workers on one reuseport port in the same namespace and on the same CPU as sluice's K
processes. The idle clients may hold their connections on either server (--idle-to): the
active connections' loss is then measured for the server holding them and for the one that
holds none, in the same run. Its idle connections get the same long keep-alive as sluice's
--idle-timeout 3600."""
import subprocess
import time
from pathlib import Path

from idle_proc import socket_inodes
from run import NGINX_CONF

NGINX_PORT = 8081

# run.py's configuration, changed where this bench differs: K workers with room for K x N
# connections, a keep-alive as long as sluice's --idle-timeout 3600, no aio threads (above)
CHANGES = (("worker_processes 1;", "worker_processes {workers};"),
           ("worker_rlimit_nofile 20000;", "worker_rlimit_nofile {nofile};"),
           ("worker_connections 19000;", "worker_connections {conns};"),
           ("thread_pool default threads=2 max_queue=65536;", ""),
           ("keepalive_timeout 65;", "keepalive_timeout 3600s;"),
           ("backlog=4096", "backlog=65535"))


def config(workdir, root, workers, conns, nofile):
    text = NGINX_CONF.format(dir=workdir, ip="127.0.0.1", port=NGINX_PORT, root=root, aio="")
    for old, new in CHANGES:
        if old not in text:  # run.py's configuration changed under this bench: say so, do not run another
            raise SystemExit(f"idle_nginx: {old!r} is no longer in run.py's NGINX_CONF")
        text = text.replace(old, new.format(workers=workers, conns=conns, nofile=nofile))
    return text


def start_nginx(cmd_in_ns, root, workers, conns, nofile, workdir):
    """The master and its `workers` workers (pids: master first); the workers run as nobody,
    so the served directory is made readable to them."""
    workdir.mkdir(parents=True, exist_ok=True)
    Path(root).chmod(0o755)
    conf = workdir / "nginx.conf"
    conf.write_text(config(workdir, root, workers, conns, nofile))
    p = subprocess.Popen(cmd_in_ns("0", "nginx", "-c", conf, "-p", workdir), stdout=subprocess.DEVNULL,
                         stderr=open(workdir / "stderr", "w"))
    end = time.monotonic() + 60
    kids = []
    while len(kids) < workers:
        if time.monotonic() > end or p.poll() is not None:
            stop_nginx(p)
            raise SystemExit(f"nginx did not start its {workers} workers: "
                             f"{(workdir / 'stderr').read_text()[-400:]!r}")
        time.sleep(0.1)
        kids = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
    # ip netns exec, taskset and setsid exec in place: p.pid is the master, its children the workers
    return p, [int(k) for k in kids]


def stop_nginx(p, timeout=90):
    if p.poll() is None:
        p.send_signal(3)  # SIGQUIT: graceful, waits for requests in flight
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def held_by_workers(workers):
    """Sockets each worker holds (connections plus its one listener), from /proc."""
    return {str(pid): {"sockets_in_proc": len(socket_inodes(pid))} for pid in workers}
