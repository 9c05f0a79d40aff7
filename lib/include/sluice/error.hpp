#pragma once
// sluice reports every failure as a sluice::Error: a category a program can switch on, a
// message that names the path, host or value and the reason, and (for some failures) the
// cause that was detected, so that no caller has to read it back out of the message.
#include <stdexcept>
#include <string>

#include "sluice/export.hpp"
#include "sluice/printable.hpp"

namespace sluice {

enum class ErrorCode {
    usage,       // a bad option or value given by the caller
    source,      // a source path missing, unreadable or changed
    destination, // the destination directory or a file in it cannot be written
    network,     // connect, listen, or a connection lost
    auth,        // the token was refused
    protocol,    // the peer sent something that breaks the wire protocol
    integrity,   // a checksum did not match
    cancelled,   // cancel() was called
    internal,
};

// Finer than the category, and independent of it: a closed peer is a network error on one
// connection and the end of a transfer on another. Most errors have none.
enum class ErrorCause {
    none,
    peer_closed,  // the peer closed the connection while more was owed (end of file)
    peer_reset,   // the connection was reset or broken (ECONNRESET, EPIPE)
    timed_out,    // a peer stayed silent, or an operation did not finish, within its timeout
    peer_aborted, // the peer stopped the transfer and said why (ABORT, or a failed final status)
};

class SLUICE_EXPORT Error : public std::runtime_error {
public:
    // The message is kept as printable(message): it often holds a peer's words (an ABORT
    // reason) or names from its manifest, and every program prints what() to a terminal.
    // Escaping here, where every message is made, leaves no call site to forget.
    Error(ErrorCode code, const std::string& message, ErrorCause cause = ErrorCause::none)
        : std::runtime_error(printable(message)), code_(code), cause_(cause) {}
    ErrorCode code() const noexcept { return code_; }
    ErrorCause cause() const noexcept { return cause_; }

private:
    ErrorCode code_;
    ErrorCause cause_;
};

// Name of an error category, as printed in JSON stats and logs.
SLUICE_EXPORT const char* error_code_name(ErrorCode code) noexcept;

// Name of a cause ("none", "peer_closed", ...), as the Python exceptions carry it.
constexpr const char* error_cause_name(ErrorCause cause) noexcept {
    switch (cause) {
    case ErrorCause::none: return "none";
    case ErrorCause::peer_closed: return "peer_closed";
    case ErrorCause::peer_reset: return "peer_reset";
    case ErrorCause::timed_out: return "timed_out";
    case ErrorCause::peer_aborted: return "peer_aborted";
    }
    return "unknown";
}

} // namespace sluice
