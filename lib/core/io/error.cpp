#include "sluice/error.hpp"

namespace sluice {

const char* error_code_name(ErrorCode code) noexcept {
    switch (code) {
    case ErrorCode::usage: return "usage";
    case ErrorCode::source: return "source";
    case ErrorCode::destination: return "destination";
    case ErrorCode::network: return "network";
    case ErrorCode::auth: return "auth";
    case ErrorCode::protocol: return "protocol";
    case ErrorCode::integrity: return "integrity";
    case ErrorCode::cancelled: return "cancelled";
    case ErrorCode::internal: return "internal";
    }
    return "unknown";
}

} // namespace sluice
