#pragma once
// Turns an errno into a sluice::Error whose message names what was being done and to what.
#include <cerrno>
#include <cstring>
#include <string>

#include "sluice/error.hpp"

namespace sluice {

[[noreturn]] inline void throw_errno(ErrorCode code, const std::string& what, int err = errno) {
    throw Error(code, what + ": " + std::strerror(err));
}

} // namespace sluice
