"""Checks and conversions of the keyword options shared by send, send_fds, send_pipe, Receiver,
Server and get: each bad value raises UsageError naming the option and what it expects."""

import os

from . import _sluice
from ._errors import UsageError

CancelFlag = _sluice.CancelFlag

# send, send_pipe, send_fds: as many streams as the link rewards, as `sluice send` by default
# (issue 16, h16o); a get's count is the client's to ask, fixed (the server has no search).
DEFAULT_SEND_STREAMS = "auto"
DEFAULT_GET_STREAMS = 4
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


def _text(value, name):
    if not isinstance(value, str):
        raise UsageError(f"{name}={value!r}: expected a str")
    return value


def _certificates(cert, key, ca, pin, crl=None):
    """Certificate mode's files and pins (sluice.send's cert, key, ca, pin, crl), checked by the library."""
    def path(value, name):
        if value is None:
            return ""
        if not isinstance(value, (str, os.PathLike)):
            raise UsageError(f"{name}={value!r}: expected a path to a PEM file, or None")
        return os.fsdecode(os.fspath(value))
    pins = [pin] if isinstance(pin, str) else list(pin or [])
    if not all(isinstance(p, str) for p in pins):
        raise UsageError(f"pin={pin!r}: expected 'sha256:HEX' or a list of them")
    return {"cert": path(cert, "cert"), "key": path(key, "key"), "ca": path(ca, "ca"), "pins": pins,
            "crl": path(crl, "crl")}


def _flag(value, name):
    if not isinstance(value, bool):
        raise UsageError(f"{name}={value!r}: expected True or False")
    return value


def _send_options(*, token, streams, block_size, rate_limit, send_path, connect_timeout,
                  idle_timeout, verbose, log, progress, progress_interval, cancel, cc=None, encrypt=None, mptcp=False,
                  certificates=None):
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
        "certificates": certificates or _certificates(None, None, None, None),
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
