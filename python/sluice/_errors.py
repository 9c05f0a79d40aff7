"""The exceptions sluice raises: one class per sluice::ErrorCode, all under sluice.Error."""


class Error(Exception):
    """A sluice failure. ``code`` is the category (as in the CLI's exit status and JSON);
    ``cause`` what was detected where one was ("peer_closed", "peer_reset", "timed_out",
    "peer_aborted"), else "none"; the message names the path, host or value and the reason."""

    code = "internal"
    cause = "none"  # errors raised in Python itself (bad arguments) have none

    def __init__(self, message):
        super().__init__(message)
        self.message = message


class UsageError(Error, ValueError):
    """A bad option, URL or value given by the caller."""

    code = "usage"


class SourceError(Error):
    """A source path is missing, unreadable or changed while being sent."""

    code = "source"


class DestinationError(Error):
    """The destination directory, or a file in it, cannot be written."""

    code = "destination"


class NetworkError(Error):
    """Connect or listen failed, or a connection was lost or timed out."""

    code = "network"


class AuthError(Error):
    """The token was refused."""

    code = "auth"


class ProtocolError(Error):
    """The peer sent something that breaks the wire protocol."""

    code = "protocol"


class IntegrityError(Error):
    """A checksum still did not match after the resends."""

    code = "integrity"


class Cancelled(Error):
    """The transfer was cancelled (CancelFlag.set(), Receiver.cancel(), or Ctrl-C)."""

    code = "cancelled"


class InternalError(Error):
    """A failure inside sluice that fits no other category."""

    code = "internal"


_BY_CODE = {cls.code: cls for cls in (UsageError, SourceError, DestinationError, NetworkError,
                                      AuthError, ProtocolError, IntegrityError, Cancelled,
                                      InternalError)}


def class_for(code):
    """The exception class for a sluice::ErrorCode name (used by the compiled module)."""
    return _BY_CODE.get(code, InternalError)

# Shown as sluice.NetworkError etc. in tracebacks: the public names.
for _cls in (Error, *_BY_CODE.values()):
    _cls.__module__ = "sluice"
