#pragma once
// Where a Receiver puts what arrives (docs/api.md, "Where it can be received"): files into a
// directory, blocks into a caller's Sink, or one byte stream (pipe mode) into a caller's fd. Everything that
// differs between the three is decided here, once, so that the session never asks which one
// it has.
#include <filesystem>
#include <memory>
#include <string>

#include "recv/paths/ordered_output.hpp"
#include "recv/paths/stream_receiver.hpp"
#include "recv/store/dest_tree.hpp"
#include "sluice/sluice.hpp"

namespace sluice {

class RecvTarget {
public:
    // Throws destination if dir is not a writable directory.
    static std::unique_ptr<RecvTarget> directory(const std::filesystem::path& dir, RecvPath path);
    static std::unique_ptr<RecvTarget> sink(Sink& sink);
    // Throws usage if fd is not open for writing.
    static std::unique_ptr<RecvTarget> output_fd(int fd);
    virtual ~RecvTarget() = default;

    // The directory; for the others a tree whose every open fails.
    const DestTree& tree() const { return tree_; }
    // Whether entries are made on disk (a directory whose path keeps the data).
    virtual bool writes_files() const { return false; }
    // Refuses the kind of entry this target cannot take, naming the command that can.
    virtual void check_kind(const wire::ManifestEntry& e) const = 0;
    // Whether an encrypted data stream's receive path opens its records itself (keys given to
    // open_stream) instead of reading plain frames from a relay.
    virtual bool opens_records() const { return false; }
    // The receive path of one data stream (index from 1); keys: see opens_records().
    virtual std::unique_ptr<StreamReceiver> open_stream(int sock, unsigned index, RecvContext& ctx,
                                                        const tls::LinkKeys* keys) = 0;
    // Stats::data_path.
    virtual std::string data_path() const = 0;
    // Whether every stream this target opens names the entries it touches in its
    // FileTable::Hold, so that complete entries may be released (issue 19).
    virtual bool streams_hold_entries() const { return false; }

    // The ordered output of a pipe transfer (sink and fd targets), else nullptr.
    OrderedOutput* pipe_output() { return out_.get(); }
    // A sink is told of every empty file and of the end of a pipe (with its final size).
    virtual void empty_file_done(const RecvFile&) {}
    virtual void pipe_done(uint64_t) {}
    // The transfer failed: every data stream waiting for its turn to write returns.
    void stop() {
        if (out_) out_->stop();
    }

protected:
    RecvTarget() = default;
    explicit RecvTarget(DestTree tree) : tree_(std::move(tree)) {}

    DestTree tree_;
    std::unique_ptr<OrderedOutput> out_;
};

} // namespace sluice
