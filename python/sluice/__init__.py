"""sluice: move files, trees and byte streams between hosts over several TCP streams, from the
page cache to the socket without copies through user space (Python binding of libsluice).

    rx = sluice.Receiver("/data/in")           # listening; rx.url is what the sender needs
    stats = sluice.send(["/data/out"], rx.url)  # on the sending side; returns a dict
    stats = rx.wait()                           # on the receiving side

Blocking calls (send, Receiver.wait) release the GIL while bytes move; progress and log
callables are called on the calling thread, at most once per ``progress_interval`` seconds.
Failures raise a subclass of ``sluice.Error`` (see ``sluice._errors``). docs/python.md has more.
"""

import os
import warnings
from dataclasses import dataclass

from . import _sluice
from ._errors import (AuthError, Cancelled, DestinationError, Error, IntegrityError,
                      InternalError, NetworkError, ProtocolError, SourceError, UsageError)

CancelFlag = _sluice.CancelFlag

__all__ = [
    "send", "send_fds", "send_pipe", "send_stream", "FdSource", "Receiver", "CancelFlag", "parse_size",
    "serve", "Server", "get",
    "Error", "UsageError", "SourceError", "DestinationError", "NetworkError", "AuthError",
    "ProtocolError", "IntegrityError", "Cancelled", "InternalError",
]

DEFAULT_STREAMS = 4
DEFAULT_BLOCK_SIZE = 8 << 20


def parse_size(value, option="size"):
    """An int, or a byte count such as "400M", "8MiB", "1G" (K/M/G/T are powers of 1024)."""
    if isinstance(value, bool):
        raise UsageError(f"{option}={value!r}: expected a byte count")
    if isinstance(value, int):
        if value < 0:
            raise UsageError(f"{option}={value}: must not be negative")
        return value
    if isinstance(value, str):
        return _sluice.parse_size(value, option)
    raise UsageError(f"{option}={value!r}: expected an int or a string such as '8M'")


def _callable_or_none(value, name):
    if value is not None and not callable(value):
        raise UsageError(f"{name}={value!r}: expected a callable or None")
    return value


def _interval(value):
    if not (isinstance(value, (int, float)) and 0.01 <= value <= 3600):
        raise UsageError(f"progress_interval={value!r}: expected 0.01 to 3600 seconds")
    return float(value)


def _cc(cc):
    """cc: a TCP congestion control name (e.g. "bbr", "cubic"), or None for the system's."""
    if cc is not None and not isinstance(cc, str):
        raise UsageError(f"cc={cc!r}: expected a congestion control name such as 'bbr' or 'cubic', or None")
    return cc or ""


def _encrypt(encrypt):
    """encrypt: None (on unless the peer is on a loopback address), True or False (both sides
    must agree; a mismatch raises AuthError naming the side and the option)."""
    if encrypt is None:
        return "auto"
    if not isinstance(encrypt, bool):
        raise UsageError(f"encrypt={encrypt!r}: expected True, False or None (on unless the peer is on loopback)")
    return "on" if encrypt else "off"


def _flag(value, name):
    if not isinstance(value, bool):
        raise UsageError(f"{name}={value!r}: expected True or False")
    return value


def _send_options(*, token, streams, block_size, rate_limit, send_path, connect_timeout,
                  idle_timeout, verbose, log, progress, progress_interval, cancel, cc=None, encrypt=None, mptcp=False):
    if cancel is not None and not isinstance(cancel, CancelFlag):
        raise UsageError(f"cancel={cancel!r}: expected a sluice.CancelFlag")
    auto = streams == "auto"  # open 16, use as many as the link rewards (stats: streams_choice)
    if not auto and (isinstance(streams, bool) or not isinstance(streams, int)):
        raise UsageError(f"streams={streams!r}: expected an int from 1 to 128, or 'auto'")
    return {
        "token": token,
        "streams": 16 if auto else streams,
        "streams_auto": auto,
        "block_size": parse_size(block_size, "block_size"),
        "rate_limit": parse_size(rate_limit, "rate_limit"),
        "send_path": send_path,
        "connect_timeout": float(connect_timeout),
        "idle_timeout": float(idle_timeout),
        "cc": _cc(cc),
        "mptcp": _flag(mptcp, "mptcp"),
        "encrypt": _encrypt(encrypt),
        "verbose": bool(verbose),
        "log": _callable_or_none(log, "log"),
        "progress": _callable_or_none(progress, "progress"),
        "progress_interval": _interval(progress_interval),
        "cancel": cancel,
    }


_TREE_FLAGS = ("hard_links", "owner", "group", "xattrs", "acls", "specials")


def _tree_options(checksum, delete, filters, exclude, flags):
    """send()'s tree options (docs/guarantees.md, "Tree metadata" and "Filters"), as the CLI's."""
    def rules(value, name):
        if value is None:
            return []
        if isinstance(value, (str, bytes)) or not all(isinstance(r, str) for r in value):
            raise UsageError(f"{name}={value!r}: expected a list of strings")
        return list(value)
    out = {"checksum": bool(checksum), "delete": bool(delete)}
    # First match wins: the explicit rules, then the excludes.
    out["filters"] = rules(filters, "filters") + ["- " + p for p in rules(exclude, "exclude")]
    for k, v in flags.items():
        if not isinstance(v, bool):
            raise UsageError(f"{k}={v!r}: expected True or False")
        out[k] = v
    return out


def send(paths, url, *, token=None, streams=DEFAULT_STREAMS, block_size=DEFAULT_BLOCK_SIZE,
         rate_limit=0, send_path="splice", connect_timeout=10.0, idle_timeout=60.0,
         verbose=False, log=None, progress=None, progress_interval=0.2, cancel=None, cc=None, encrypt=None, mptcp=False,
         checksum=False, delete=False, filters=None, exclude=None, hard_links=True, owner=True, group=True,
         xattrs=True, acls=True, specials=True, announce_window=16384):
    """Send files, directories (recursively) and symlinks to the receiver at ``url``
    (``sluice://HOST:PORT/?token=...``); each path lands under the receiver's directory by its
    name. Returns the final stats as a dict (the fields of ``sluice send --json``) once the
    receiver has verified everything; raises a ``sluice.Error`` subclass otherwise.

    paths: a path (str or os.PathLike) or a list of them. token: overrides the URL's token;
    with neither, the SLUICE_TOKEN environment variable is used (a URL may then omit it).
    block_size, rate_limit: ints or strings such as "8M" (rate_limit in bytes/s, 0 = none).
    send_path: "splice", "sendfile" or "read_send". Timeouts in seconds.
    progress: callable(dict) called on this thread every ``progress_interval`` seconds and
    once at the end (bytes_done, bytes_total, files_done, files_total, walk_done, elapsed,
    streams). log: callable(str) for warnings and verbose lines (default: the "sluice" logger).
    cancel: a CancelFlag; set() it from any thread to stop (raises sluice.Cancelled).
    cc: TCP congestion control of every connection ("bbr", "cubic"; None: the system's); a
    name the kernel lacks raises UsageError listing the available ones.
    mptcp: Multipath TCP on every connection (``--mptcp``); where the kernel, receiver or path
    lacks it, plain TCP: the stats' mptcp ("on"/"fallback") and mptcp_connections say which and why.
    encrypt: None (TLS 1.3 unless the receiver is on a loopback address), True or False; the
    receiver must agree (AuthError otherwise). The stats' encryption fields say what ran.
    streams: an int, or "auto" (open 16, use as many as the link rewards; the stats'
    streams_used and streams_choice say how many and why).
    An exception raised by progress or log, or Ctrl-C, cancels the transfer and is re-raised.
    Trees (as ``sluice send``'s options of the same names): checksum compares the content of
    files whose size and mtime match; delete removes what the receiver has under the sent
    directories that they no longer hold; filters: rsync-style rules in order, "- PATTERN",
    "+ PATTERN" or ". FILE" (first match wins); exclude: patterns, after the filters;
    hard_links, owner, group, xattrs, acls, specials: what of the tree is kept (all on).
    announce_window: at most this many files announced to the receiver and not yet complete
    there (``--announce-window``; 0: the whole list at once), so that neither side's memory
    grows with the file count; the stats' files_held_peak says how many were at once.
    """
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    paths = [os.fsdecode(os.fspath(p)) for p in paths]
    if not isinstance(url, str):
        raise UsageError(f"url={url!r}: expected a sluice://HOST:PORT/?token=... string")
    opts = _send_options(token=token, streams=streams, block_size=block_size,
                         rate_limit=rate_limit, send_path=send_path,
                         connect_timeout=connect_timeout, idle_timeout=idle_timeout,
                         verbose=verbose, log=log, progress=progress,
                         progress_interval=progress_interval, cancel=cancel, cc=cc,
                         encrypt=encrypt, mptcp=mptcp)
    if isinstance(announce_window, bool) or not isinstance(announce_window, int) \
            or not 0 <= announce_window <= 1 << 30:
        raise UsageError(f"announce_window={announce_window!r}: expected a count of files from 0 (no window) "
                         f"to {1 << 30}")
    opts["announce_window"] = announce_window
    opts.update(_tree_options(checksum, delete, filters, exclude,
                              {"hard_links": hard_links, "owner": owner, "group": group, "xattrs": xattrs,
                               "acls": acls, "specials": specials}))
    return _sluice.send(paths, url, opts)


def _fd_of(obj, what):
    """An int fd, or obj.fileno() for file objects and sockets; the fd stays the caller's."""
    if isinstance(obj, bool):
        raise UsageError(f"{what}={obj!r}: expected a file descriptor or an object with fileno()")
    if isinstance(obj, int):
        fd = obj
    elif hasattr(obj, "fileno"):
        fd = obj.fileno()
    else:
        raise UsageError(f"{what}={obj!r}: expected a file descriptor or an object with fileno()")
    if fd < 0:
        raise UsageError(f"{what}: fd {fd} is not open")
    return fd


def send_pipe(source, url, *, token=None, streams=DEFAULT_STREAMS,
              block_size=DEFAULT_BLOCK_SIZE, rate_limit=0, send_path="splice",
              connect_timeout=10.0, idle_timeout=60.0, verbose=False, log=None,
              progress=None, progress_interval=0.2, cancel=None, cc=None, encrypt=None, mptcp=False):
    """Pipe mode (the ``producer | nc`` replacement): send what can be read from ``source``
    (an fd, or a file object, pipe or socket with fileno()) until end of file, in order over
    all streams, to a receiver writing to an fd or a sink (``Receiver(fd=...)``,
    ``Receiver(sink=...)``). Pipe data is spliced to the sockets, not copied. Data already
    buffered inside a Python file object is not seen: pass unbuffered objects or raw fds.
    Options, return value and errors as for ``send``."""
    fd = _fd_of(source, "source")
    if not isinstance(url, str):
        raise UsageError(f"url={url!r}: expected a sluice://HOST:PORT/?token=... string")
    opts = _send_options(token=token, streams=streams, block_size=block_size,
                         rate_limit=rate_limit, send_path=send_path,
                         connect_timeout=connect_timeout, idle_timeout=idle_timeout,
                         verbose=verbose, log=log, progress=progress,
                         progress_interval=progress_interval, cancel=cancel, cc=cc,
                         encrypt=encrypt, mptcp=mptcp)
    return _sluice.send_pipe(fd, url, opts)


def send_stream(*args, **kwargs):
    """Deprecated: the old name of ``send_pipe`` (pipe mode was called stream mode). Same
    arguments and result; warns with ``DeprecationWarning``."""
    warnings.warn("sluice.send_stream is deprecated: use sluice.send_pipe", DeprecationWarning, stacklevel=2)
    return send_pipe(*args, **kwargs)


@dataclass
class FdSource:
    """A range of an open file for ``send_fds``, stored under ``name`` at the receiver.
    length None: from offset to the end of the file. mtime_ns -1: the file's own mtime."""

    file: object          # an fd or an object with fileno(); stays the caller's
    name: str             # relative path at the receiver ('/'-separated, no '..')
    offset: int = 0
    length: object = None
    mode: int = 0o644
    mtime_ns: int = -1


def send_fds(sources, url, *, token=None, streams=DEFAULT_STREAMS,
             block_size=DEFAULT_BLOCK_SIZE, rate_limit=0, send_path="splice",
             connect_timeout=10.0, idle_timeout=60.0, verbose=False, log=None,
             progress=None, progress_interval=0.2, cancel=None, cc=None, encrypt=None, mptcp=False):
    """Send ranges of open files (a list of ``FdSource``), each stored under its name; the
    same guarantees, options, return value and errors as ``send``."""
    rows = []
    for s in sources:
        if not isinstance(s, FdSource):
            raise UsageError(f"{s!r}: expected a sluice.FdSource")
        fd = _fd_of(s.file, "FdSource.file")
        length = s.length
        if length is None:
            length = os.fstat(fd).st_size - s.offset
        if s.offset < 0 or length < 0:
            raise UsageError(f"FdSource {s.name!r}: offset {s.offset} / length {length} must not be negative")
        rows.append((fd, s.offset, length, s.name, s.mode, s.mtime_ns))
    if not isinstance(url, str):
        raise UsageError(f"url={url!r}: expected a sluice://HOST:PORT/?token=... string")
    opts = _send_options(token=token, streams=streams, block_size=block_size,
                         rate_limit=rate_limit, send_path=send_path,
                         connect_timeout=connect_timeout, idle_timeout=idle_timeout,
                         verbose=verbose, log=log, progress=progress,
                         progress_interval=progress_interval, cancel=cancel, cc=cc,
                         encrypt=encrypt, mptcp=mptcp)
    return _sluice.send_fds(rows, url, opts)


class Receiver:
    """Listens for one transfer. ``url`` is the line to give the sender; ``wait()`` serves the
    transfer and returns its stats as a dict (the fields of ``sluice recv --json``).

    Give exactly one destination:
    dir: the directory files land in (each sent path by its name);
    fd: an fd or object with fileno() that one pipe transfer (send_pipe) is written to, in
    order (spliced when it is a pipe); it stays the caller's;
    sink: an object with write(entry, offset, data) and optionally entry_done(entry), called
    once data has matched its checksum (tree transfers: from several threads, any order;
    streams: in order). entry is a dict (id, path, size, mode, mtime_ns, is_pipe); data is a
    memoryview valid only during the call (copy what you keep). An exception raised there
    fails the transfer and is re-raised by wait().
    port: 0 lets the kernel pick one. token: None takes the SLUICE_TOKEN environment variable,
    or makes a random one if it is unset or empty.
    bind_address: "" = all addresses. advertise_host: the host put into ``url``.
    recv_path: "direct", "recv_write", "splice" or "null". sync: fsync before success.
    verify: re-read each file from disk before renaming it. log: callable(str).
    max_manifest_bytes: the most memory the manifest may take (a size; 0: a quarter of RAM).
    cc: TCP congestion control of every accepted connection (None: the system's).
    mptcp: listen with Multipath TCP (``--mptcp``; plain TCP senders are still accepted).
    numeric_ids: keep owners by their numbers alone, not by the names the sender sends.
    encrypt: None (TLS 1.3 with any sender not on a loopback address), True or False; the
    sender must agree.
    """

    def __init__(self, dir=None, *, fd=None, sink=None, port=0, token=None, bind_address="", advertise_host="",
                 recv_path="direct", sync=False, verify=False, idle_timeout=60.0,
                 verbose=False, log=None, max_manifest_bytes=0, cc=None, numeric_ids=False, encrypt=None,
                 mptcp=False):
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise UsageError(f"port={port!r}: expected an int from 0 to 65535")
        opts = {
            "port": port,
            "token": token,
            "bind_address": bind_address,
            "advertise_host": advertise_host,
            "recv_path": recv_path,
            "sync": bool(sync),
            "verify": bool(verify),
            "idle_timeout": float(idle_timeout),
            "max_manifest_bytes": parse_size(max_manifest_bytes, "max_manifest_bytes"),
            "cc": _cc(cc),
            "mptcp": _flag(mptcp, "mptcp"),
            "numeric_ids": bool(numeric_ids),
            "encrypt": _encrypt(encrypt),
            "verbose": bool(verbose),
            "log": _callable_or_none(log, "log"),
        }
        given = [k for k, v in (("dir", dir), ("fd", fd), ("sink", sink)) if v is not None]
        if len(given) != 1:
            raise UsageError(f"Receiver: give exactly one of dir, fd and sink (got {given or 'none'})")
        if dir is not None:
            self._rx = _sluice.Receiver(os.fsdecode(os.fspath(dir)), opts)
        elif fd is not None:
            self._rx = _sluice.Receiver.for_fd(_fd_of(fd, "fd"), opts)
        else:
            self._rx = _sluice.Receiver.for_sink(sink, opts)

    @property
    def url(self):
        """sluice://HOST:PORT/?token=SECRET: what a sender needs."""
        return self._rx.url

    @property
    def port(self):
        return self._rx.port

    def wait(self, *, progress=None, progress_interval=0.2):
        """Serve one transfer to completion; returns its stats dict or raises. Releases the
        GIL; ``progress`` is called on this thread as for ``send``."""
        return self._rx.wait(_callable_or_none(progress, "progress"), _interval(progress_interval))

    def cancel(self):
        """Make a running (or the next) wait() raise sluice.Cancelled; safe from any thread."""
        self._rx.cancel()

    def __repr__(self):
        return f"<sluice.Receiver port={self.port}>"  # the URL holds the token: keep it out of logs


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
    or "1G"); max_uploads: bodies received at once (more get 503).
    """

    def __init__(self, dir, *, http_port=0, port=None, token=None, public=False, bind_address="", threads=0,
                 max_connections=16384, max_gets=64, get_rate_limit=0, allow_upload=False, sync=False,
                 max_upload_size="1G", max_uploads=64, verbose=False):
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
            "verbose": bool(verbose),
        }
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


def get(url, dest, *, token=None, streams=DEFAULT_STREAMS, recv_path="direct", sync=False, verify=False,
        connect_timeout=10.0, idle_timeout=60.0, verbose=False, log=None, progress=None, progress_interval=0.2,
        cancel=None, connect_back=False):
    """Fetches ``sluice://HOST:PORT/PATH`` (a file or a tree, relative to the served directory)
    from a ``sluice serve --port`` into the directory ``dest``, over sluice's protocol with
    ``streams`` streams, a checksum per block, and resume (the same call again continues).
    This host opens every connection (behind NAT too; ``connect_back``: the server connects here).
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
                         cancel=cancel)
    opts.update(recv_path=recv_path, sync=bool(sync), verify=bool(verify), connect_back=bool(connect_back))
    return _sluice.get(f"sluice://{host_port}/{query}", path, os.fsdecode(os.fspath(dest)), opts)
