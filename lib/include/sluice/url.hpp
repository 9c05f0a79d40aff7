#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "sluice/export.hpp"

namespace sluice {

// Where a receiver listens and the secret that admits a sender:
// sluice://HOST:PORT/?token=SECRET  (IPv6 hosts in brackets).
struct Endpoint {
    std::string host;
    uint16_t port = 0;
    std::string token;
};

// Throws sluice::Error(usage) naming the part of the URL that is wrong.
SLUICE_EXPORT Endpoint parse_url(std::string_view url);
// Parses HOST:PORT (as given to --to).
SLUICE_EXPORT Endpoint parse_host_port(std::string_view host_port);
SLUICE_EXPORT std::string format_url(const Endpoint& e);

// Parses a byte count such as 400M, 8MiB, 1G, 65536 (K/M/G/T are powers of 1024).
SLUICE_EXPORT uint64_t parse_size(std::string_view text, const char* option);

} // namespace sluice
