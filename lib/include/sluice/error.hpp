#pragma once
// sluice reports every failure as a sluice::Error: a category a program can switch on and a
// message that names the path, host or value and the reason.
#include <stdexcept>
#include <string>

#include "sluice/export.hpp"

namespace sluice {

enum class ErrorCode {
    usage,          // a bad option or value given by the caller
    source,         // a source path missing, unreadable or changed
    destination,    // the destination directory or a file in it cannot be written
    network,        // connect, listen, or a connection lost
    auth,           // the token was refused
    protocol,       // the peer sent something that breaks the wire protocol
    integrity,      // a checksum did not match
    cancelled,      // cancel() was called
    internal,
};

class SLUICE_EXPORT Error : public std::runtime_error {
public:
    Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
    ErrorCode code() const noexcept { return code_; }

private:
    ErrorCode code_;
};

// Name of an error category, as printed in JSON stats and logs.
SLUICE_EXPORT const char* error_code_name(ErrorCode code) noexcept;

} // namespace sluice
