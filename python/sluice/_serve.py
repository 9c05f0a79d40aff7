"""sluice serve in this process (Server, serve) and sluice get (get): the serving side and its
client, apart from the point-to-point send/Receiver in __init__."""

import os

from . import _sluice
from ._errors import UsageError
from ._options import DEFAULT_BLOCK_SIZE, DEFAULT_GET_STREAMS, _certificates, _flag, _send_options, parse_size


class Server:
    """``sluice serve`` in this process: serves ``dir`` over HTTP/1.1 on ``http_port`` (0: the
    kernel picks; see ``port``) and, when ``port`` is not None, ``sluice get`` sessions over
    sluice's protocol on ``port`` (see ``get_port``). Runs on threads of its own from the
    moment it is made; ``stop()`` lets responses in flight finish and raises what the server
    failed with, if anything. Usable as a context manager (stops on exit).

    token: required of clients unless ``public``; None takes SLUICE_TOKEN. threads: ring
    threads (0: the online CPUs). max_gets: get sessions at once (more are refused as busy);
    get_rate_limit: bytes/s of each get session (an int or "100M"; 0: unlimited).
    allow_upload: accept PUT and POST of files (always with the token, even when ``public``);
    sync: answer an upload once it is durable; max_upload_size: larger bodies get 413 (an int
    or "1G"); max_uploads: bodies received at once (more get 503). With allow_upload and port,
    ``sluice.send(paths, url)`` to the sluice port pushes into the directory (``--max-pushes``:
    max_pushes at once, more are refused as busy); a push is stored as the server's own user
    and group without set-id bits, file capabilities or security./trusted. attributes unless
    push_keep_owners (owners and groups kept by name) or push_keep_privileges (everything, as a
    root ``sluice recv``: anyone with the token is then root here); ``stats()``'s
    ``push_metadata_not_kept`` says what was dropped. mptcp: the get port listens
    with Multipath TCP (``--mptcp``; plain TCP clients are still served). cert, key: PEM files
    of a certificate and its key: the HTTP port speaks HTTPS only (``--cert``/``--key``: TLS 1.3,
    docs/design.md "HTTPS"), and with ``port`` the same certificate authenticates the sluice port
    to ``get(..., ca=...)`` or ``pin=``; a bad file raises UsageError naming it. ca, pin, crl
    (``--ca``/``--pin``/``--crl``, with cert and port): the sluice port requires a client
    certificate chaining to ca (not revoked by crl) or with one of the pinned keys.
    """

    def __init__(self, dir, *, http_port=0, port=None, token=None, public=False, bind_address="", threads=0,
                 max_connections=16384, max_gets=64, get_rate_limit=0, allow_upload=False, sync=False,
                 max_upload_size="1G", max_uploads=64, max_pushes=16, verbose=False, mptcp=False, cert=None, key=None, ca=None,
                 pin=None, crl=None, push_keep_owners=False, push_keep_privileges=False):
        for name, value in (("http_port", http_port), ("port", port)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535):
                raise UsageError(f"{name}={value!r}: expected an int from 0 to 65535")
        if token is None:
            token = os.environ.get("SLUICE_TOKEN", "")
        opts = {
            "http_port": http_port, "port": port, "token": token, "public": bool(public),
            "bind_address": bind_address, "threads": int(threads), "max_connections": int(max_connections),
            "max_gets": int(max_gets), "get_rate_limit": parse_size(get_rate_limit, "get_rate_limit"),
            "allow_upload": bool(allow_upload), "sync": bool(sync),
            "max_upload_size": parse_size(max_upload_size, "max_upload_size"), "max_uploads": int(max_uploads),
            "max_pushes": int(max_pushes),
            "push_trust": "full" if _flag(push_keep_privileges, "push_keep_privileges") else
                          "owners" if _flag(push_keep_owners, "push_keep_owners") else "none",
            "verbose": bool(verbose), "mptcp": _flag(mptcp, "mptcp"),
            "cert": os.fsdecode(os.fspath(cert)) if cert is not None else "",
            "key": os.fsdecode(os.fspath(key)) if key is not None else "",
            "certificates": _certificates(None, None, ca, pin, crl),
        }
        if opts["push_trust"] != "none" and not (allow_upload and port is not None):
            raise UsageError("push_keep_owners / push_keep_privileges are for pushes: they need port= and allow_upload=True")
        if opts["mptcp"] and port is None:
            raise UsageError("mptcp=True needs port= (it is for the get sessions' port)")
        self._srv = _sluice.Server(os.fsdecode(os.fspath(dir)), opts)

    @property
    def port(self):
        """The HTTP port."""
        return self._srv.port

    @property
    def get_port(self):
        """The sluice port of get sessions (0 when ``port`` was None)."""
        return self._srv.get_port

    def stats(self):
        """The counters of ``/_stats`` as a dict."""
        import json
        return json.loads(self._srv.stats_json())

    def stop(self):
        self._srv.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


def serve(dir, **kwargs):
    """Starts serving ``dir`` and returns the running ``Server`` (see its options)."""
    return Server(dir, **kwargs)


def get(url, dest, *, token=None, streams=DEFAULT_GET_STREAMS, recv_path="direct", sync=False, verify=False,
        connect_timeout=10.0, idle_timeout=60.0, verbose=False, log=None, progress=None, progress_interval=0.2,
        cancel=None, connect_back=False, mptcp=False, encrypt=None, cert=None, key=None, ca=None, pin=None, crl=None):
    """Fetches ``sluice://HOST:PORT/PATH`` (a file or a tree, relative to the served directory)
    from a ``sluice serve --port`` into the directory ``dest``, over sluice's protocol with
    ``streams`` streams, a checksum per block, and resume (the same call again continues).
    This host opens every connection (behind NAT too; ``connect_back``: the server connects here).
    mptcp: Multipath TCP on every connection (``--mptcp``; the server needs it too); where the
    kernel, server or path lacks it, plain TCP: the stats' mptcp ("on"/"fallback") and
    mptcp_connections say which and why.
    encrypt: None (TLS 1.3 unless the server is on a loopback address), True or False; the
    server follows this side's choice. The stats' encryption fields say what ran.
    ca, pin, crl, cert, key: certificate mode as ``sluice get --ca/--pin/--crl/--cert/--key``:
    the server's certificate is verified on the request connection before the request is sent
    (a server without one raises AuthError); cert and key answer a server that requires a client
    certificate.
    Returns the receiver's stats as a dict; options, progress, log, cancel and errors as for ``send``."""
    if not isinstance(url, str) or not url.startswith("sluice://"):
        raise UsageError(f"url={url!r}: expected a sluice://HOST:PORT/PATH string")
    rest = url[len("sluice://"):]
    query = ""
    if "?" in rest:
        rest, query = rest.split("?", 1)
        query = "?" + query
    host_port, _, path = rest.partition("/")
    opts = _send_options(token=token, streams=streams, block_size=DEFAULT_BLOCK_SIZE, rate_limit=0,
                         send_path="splice", connect_timeout=connect_timeout, idle_timeout=idle_timeout,
                         verbose=verbose, log=log, progress=progress, progress_interval=progress_interval,
                         cancel=cancel, mptcp=mptcp, encrypt=encrypt,
                         certificates=_certificates(cert, key, ca, pin, crl))
    opts.update(recv_path=recv_path, sync=bool(sync), verify=bool(verify), connect_back=bool(connect_back))
    return _sluice.get(f"sluice://{host_port}/{query}", path, os.fsdecode(os.fspath(dest)), opts)
