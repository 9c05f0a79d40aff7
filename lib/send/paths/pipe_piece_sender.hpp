#pragma once
// Pipe mode, sending side: the input (a pipe, file or socket) is spliced into one pipe per
// piece slot, and each data stream splices its slots' pipes into its socket behind a BLOCK
// header. The bytes never enter user space.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/io/aligned_buffer.hpp"
#include "core/io/pipe.hpp"

namespace sluice {

class PieceSource {
public:
    explicit PieceSource(int in_fd);
    // Moves up to max bytes of input into p: waits for the first byte (asking `stop` about
    // every 200 ms), then takes what is ready without waiting. 0 at end of input.
    size_t fill(Pipe& p, size_t max, const std::function<bool()>& stop);
    // Why the input is copied rather than spliced (empty when spliced).
    const std::string& fallback() const { return fallback_; }
    // Why the input pipe stays smaller than a piece (empty when it grew or is no pipe).
    const std::string& small_pipe() const { return small_pipe_; }

private:
    size_t copy_fill(Pipe& p, size_t max);

    int in_;
    std::string fallback_;
    std::string small_pipe_;
    std::unique_ptr<AlignedBuffer> bounce_owner_;
};

// Sends one piece: the BLOCK header, then `length` bytes spliced from p into sock.
void send_piece(int sock, Pipe& p, uint64_t pipe_id, uint64_t offset, size_t length);

} // namespace sluice
