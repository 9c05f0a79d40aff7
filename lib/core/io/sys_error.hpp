#pragma once
// Turns an errno into a sluice::Error whose message names what was being done and to what.
// errno is mapped to an ErrorCause here, once, so that no caller matches strerror's text.
#include <cerrno>
#include <cstring>
#include <string>

#include "sluice/error.hpp"

namespace sluice {

constexpr ErrorCause cause_of_errno(int err) noexcept {
    switch (err) {
    case ETIMEDOUT: return ErrorCause::timed_out;
    case ECONNRESET:
    case ECONNABORTED:
    case EPIPE: return ErrorCause::peer_reset;
    default: return ErrorCause::none;
    }
}

[[noreturn]] inline void throw_errno(ErrorCode code, const std::string& what, int err = errno) {
    throw Error(code, what + ": " + std::strerror(err), cause_of_errno(err));
}

} // namespace sluice
