// Names of the data paths, as the CLI takes them and the stats report them.
#include <string>

#include "sluice/sluice.hpp"

namespace sluice {

const char* send_path_name(SendPath p) {
    switch (p) {
    case SendPath::splice: return "splice";
    case SendPath::sendfile: return "sendfile";
    case SendPath::read_send: return "read_send";
    case SendPath::zc: return "zc";
    }
    return "?";
}

const char* recv_path_name(RecvPath p) {
    switch (p) {
    case RecvPath::recv_write: return "recv_write";
    case RecvPath::splice: return "splice";
    case RecvPath::direct: return "direct";
    case RecvPath::discard: return "null";
    }
    return "?";
}

SendPath parse_send_path(std::string_view n) {
    if (n == "splice") return SendPath::splice;
    if (n == "sendfile") return SendPath::sendfile;
    if (n == "read_send" || n == "read-send") return SendPath::read_send;
    if (n == "zc") return SendPath::zc;
    throw Error(ErrorCode::usage, "--send-path '" + std::string(n) + "': expected splice, sendfile, zc or read_send");
}

RecvPath parse_recv_path(std::string_view n) {
    if (n == "recv_write" || n == "recv-write") return RecvPath::recv_write;
    if (n == "splice") return RecvPath::splice;
    if (n == "direct") return RecvPath::direct;
    if (n == "null") return RecvPath::discard;
    throw Error(ErrorCode::usage, "--recv-path '" + std::string(n) + "': expected direct, recv_write, splice or null");
}

} // namespace sluice
