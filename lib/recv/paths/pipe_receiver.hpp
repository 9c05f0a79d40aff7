#pragma once
// Receive paths for a Receiver that does not write a directory: pipe mode into an fd, and
// a caller's Sink (Pipe pieces in order; file blocks after their checksum matched).
#include <memory>

#include "recv/paths/ordered_output.hpp"
#include "recv/paths/stream_receiver.hpp"

namespace sluice {

// Pipe pieces parked in this data stream's pipe and spliced to the output in turn.
std::unique_ptr<StreamReceiver> make_pipe_to_fd_receiver(int sock, unsigned index, RecvContext& ctx, OrderedOutput& out);
// Everything received into a buffer, verified, and handed to the sink.
std::unique_ptr<StreamReceiver> make_sink_receiver(int sock, unsigned index, RecvContext& ctx, Sink& sink,
                                                   OrderedOutput& pipe_out);

SinkEntry sink_entry_of(const wire::ManifestEntry& e);

} // namespace sluice
