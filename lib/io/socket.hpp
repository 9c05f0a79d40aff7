#pragma once
// Blocking TCP helpers for set-up and control traffic. Data paths use the ring instead.
#include <cstdint>
#include <span>
#include <string>

#include "io/unique_fd.hpp"

namespace sluice {

UniqueFd listen_tcp(const std::string& bind_address, uint16_t port);
uint16_t local_port(int fd);
// Connects within timeout_ms; the error names host, port and the address tried.
UniqueFd connect_tcp(const std::string& host, uint16_t port, int timeout_ms);

void set_nodelay(int fd);
void set_socket_buffers(int fd, int bytes);
void set_io_timeout(int fd, int ms); // SO_RCVTIMEO and SO_SNDTIMEO

// Sends or receives exactly the span, or throws a network Error naming `what`.
void send_all(int fd, std::span<const unsigned char> data, const char* what);
void recv_exact(int fd, std::span<unsigned char> data, const char* what);

// The address a peer should use to reach this host (first non-loopback IPv4), or 127.0.0.1.
std::string primary_address();

} // namespace sluice
