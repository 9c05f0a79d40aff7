// Names and families of the operations the probe counts (enum sl_op, IORING_OP_*).
#pragma once
#include <cstdint>
#include <string>

namespace sluice::trace {

enum class OpFamily : uint8_t {
    read,       // fd -> user memory
    write,      // user memory -> fd
    read_mmsg,  // recvmmsg: returns a message count
    write_mmsg, // sendmmsg
    splice,     // fd -> fd inside the kernel (splice, tee, sendfile, copy_file_range)
    vmsplice,   // user pages <-> pipe
    send_zc,    // io_uring SEND_ZC / SENDMSG_ZC
    other,      // no payload
};

struct OpInfo {
    std::string name; // "read", "io_uring:splice"
    OpFamily family = OpFamily::other;
    bool uring = false;
    bool swap_sides = false; // io_uring splice/tee: the probe sees sqe->fd (destination) first
};

// op as stored in sl_flow_key.op (enum sl_op, or SL_OP_URING | opcode).
OpInfo op_info(uint16_t op);

} // namespace sluice::trace
