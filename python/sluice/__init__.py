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

from ._options import (DEFAULT_BLOCK_SIZE, DEFAULT_SEND_STREAMS, CancelFlag, _callable_or_none, _cc, _certificates, _encrypt, _flag,
                       _interval, _send_options, _text, _tree_options, parse_size)
from ._serve import Server, get, serve

__all__ = [
    "send", "send_fds", "send_pipe", "send_stream", "FdSource", "Receiver", "CancelFlag", "parse_size",
    "serve", "Server", "get",
    "Error", "UsageError", "SourceError", "DestinationError", "NetworkError", "AuthError",
    "ProtocolError", "IntegrityError", "Cancelled", "InternalError",
]

def send(paths, url, *, token=None, streams=DEFAULT_SEND_STREAMS, block_size=DEFAULT_BLOCK_SIZE,
         rate_limit=0, send_path="splice", connect_timeout=10.0, idle_timeout=60.0,
         verbose=False, log=None, progress=None, progress_interval=0.2, cancel=None, cc=None, encrypt=None, mptcp=False,
         cert=None, key=None, ca=None, pin=None, crl=None,
         checksum=False, delete=False, filters=None, exclude=None, hard_links=True, owner=True, group=True,
         xattrs=True, acls=True, specials=True, announce_window=16384, dry_run=False, usermap="", groupmap=""):
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
    cert, key, ca, pin: certificate mode (``--cert`` ... ``--pin``; docs/guarantees.md,
    "Certificates"): ca, a PEM file of CAs the receiver's certificate must chain to (and name
    the host); pin, "sha256:HEX" of the receiver's public key (SPKI), or a list of them; cert
    and key, this sender's certificate for a receiver that verifies senders; crl (with ca),
    a PEM file of CRLs: a receiver whose chain holds a certificate they revoke is refused
    (AuthError naming its subject and serial; a bad file is a UsageError naming it). The token
    still authorizes the transfer. The stats' tls_mode and tls_*_handshakes say what ran.
    streams: "auto" (the default: open 16, use as many as the link rewards, 4 without a search on
    a path under 2 ms; the stats' streams_used and streams_choice say how many and why), or an
    int from 1 to 128 for a fixed count.
    An exception raised by progress or log, or Ctrl-C, cancels the transfer and is re-raised.
    Trees (as ``sluice send``'s options of the same names): checksum compares the content of
    files whose size and mtime match; delete removes what the receiver has under the sent
    directories that they no longer hold; filters: rsync-style rules in order, "- PATTERN",
    "+ PATTERN" or ". FILE" (first match wins); exclude: patterns, after the filters;
    hard_links, owner, group, xattrs, acls, specials: what of the tree is kept (all on).
    announce_window: at most this many files announced to the receiver and not yet complete
    there (``--announce-window``; 0: the whole list at once), so that neither side's memory
    grows with the file count; the stats' files_held_peak says how many were at once.
    usermap, groupmap: owner maps for the receiver (``--usermap``/``--groupmap``, rsync's
    "FROM:TO,..."), applied after its own; one it cannot use fails the transfer.
    dry_run: send no data and change nothing (``--dry-run``); the stats' "changes" list what
    the receiver would do, one dict per path (item as rsync's --itemize-changes, path,
    target, bytes); a deletion's path is the receiver's text.
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
                         encrypt=encrypt, mptcp=mptcp,
                         certificates=_certificates(cert, key, ca, pin, crl))
    if isinstance(announce_window, bool) or not isinstance(announce_window, int) \
            or not 0 <= announce_window <= 1 << 30:
        raise UsageError(f"announce_window={announce_window!r}: expected a count of files from 0 (no window) "
                         f"to {1 << 30}")
    opts["announce_window"] = announce_window
    opts["dry_run"] = bool(dry_run)
    opts["usermap"], opts["groupmap"] = _text(usermap, "usermap"), _text(groupmap, "groupmap")
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


def send_pipe(source, url, *, token=None, streams=DEFAULT_SEND_STREAMS,
              block_size=DEFAULT_BLOCK_SIZE, rate_limit=0, send_path="splice",
              connect_timeout=10.0, idle_timeout=60.0, verbose=False, log=None,
              progress=None, progress_interval=0.2, cancel=None, cc=None, encrypt=None, mptcp=False,
              cert=None, key=None, ca=None, pin=None, crl=None):
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
                         encrypt=encrypt, mptcp=mptcp,
                         certificates=_certificates(cert, key, ca, pin, crl))
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


def send_fds(sources, url, *, token=None, streams=DEFAULT_SEND_STREAMS,
             block_size=DEFAULT_BLOCK_SIZE, rate_limit=0, send_path="splice",
             connect_timeout=10.0, idle_timeout=60.0, verbose=False, log=None,
             progress=None, progress_interval=0.2, cancel=None, cc=None, encrypt=None, mptcp=False,
             cert=None, key=None, ca=None, pin=None, crl=None):
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
                         encrypt=encrypt, mptcp=mptcp,
                         certificates=_certificates(cert, key, ca, pin, crl))
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
    sums_cache: a directory where the block sums of the large files this receiver writes are
    kept, so the next update of such a file need not read its old version (``--sums-cache``;
    docs/guarantees.md "The block-sums cache"). None, the default, keeps none (the CLI's
    default is ``$XDG_CACHE_HOME/sluice/block-sums``).
    usermap, groupmap: rsync's ``--usermap``/``--groupmap`` ("FROM:TO,..."; see the man page);
    a TO this host does not know raises UsageError.
    encrypt: None (TLS 1.3 with any sender not on a loopback address), True or False; the
    sender must agree.
    cert, key: certificate mode (PEM files; ``--cert``/``--key``): the sender must give ca or
    pin; ca, pin (as send's): also require a certificate from the sender; crl (with ca, as
    send's): refuse a sender whose chain holds a revoked certificate.
    """

    def __init__(self, dir=None, *, fd=None, sink=None, port=0, token=None, bind_address="", advertise_host="",
                 recv_path="direct", sync=False, verify=False, idle_timeout=60.0,
                 verbose=False, log=None, max_manifest_bytes=0, cc=None, numeric_ids=False, encrypt=None,
                 mptcp=False, usermap="", groupmap="", cert=None, key=None, ca=None, pin=None, crl=None,
                 sums_cache=None):
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
            "sums_cache": "" if sums_cache is None else os.fsdecode(os.fspath(sums_cache)),
            "usermap": _text(usermap, "usermap"),
            "groupmap": _text(groupmap, "groupmap"),
            "encrypt": _encrypt(encrypt),
            "certificates": _certificates(cert, key, ca, pin, crl),
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
