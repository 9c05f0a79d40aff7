#include "recv/session/recv_target.hpp"

#include <fcntl.h>

#include "recv/paths/pipe_receiver.hpp"

namespace sluice {

namespace {

bool is_pipe(const wire::ManifestEntry& e) { return e.kind == wire::EntryKind::pipe; }

class DirectoryTarget final : public RecvTarget {
public:
    DirectoryTarget(const std::filesystem::path& dir, RecvPath path) : RecvTarget(DestTree(dir)), path_(path) {}

    bool writes_files() const override { return path_ != RecvPath::discard; }
    void check_kind(const wire::ManifestEntry& e) const override {
        if (is_pipe(e))
            throw Error(ErrorCode::usage, "the sender sends a byte stream ('" + e.path +
                                              "'), but this receiver writes files into '" + tree_.display() +
                                              "': receive streams with `sluice recv --stdout`");
    }
    bool opens_records() const override { return true; }
    std::unique_ptr<StreamReceiver> open_stream(int sock, unsigned index, RecvContext& ctx,
                                                const tls::LinkKeys* keys) override {
        return make_stream_receiver(path_, sock, index, ctx, keys);
    }
    std::string data_path() const override { return recv_path_name(path_); }
    // Every file receive path names what it touches (direct_receiver.cpp, splice_receiver.cpp,
    // recv_write_receiver.cpp, which also serves the discard path).
    bool streams_hold_entries() const override { return true; }

private:
    RecvPath path_;
};

// Takes files (blocks, as they are verified) and streams (in order).
class SinkTarget final : public RecvTarget {
public:
    explicit SinkTarget(Sink& sink) : sink_(sink) { out_ = std::make_unique<OrderedOutput>(sink); }

    void check_kind(const wire::ManifestEntry&) const override {}
    std::unique_ptr<StreamReceiver> open_stream(int sock, unsigned index, RecvContext& ctx, const tls::LinkKeys*) override {
        return make_sink_receiver(sock, index, ctx, sink_, *out_);
    }
    std::string data_path() const override { return "sink"; }
    void empty_file_done(const RecvFile& f) override { sink_.entry_done(sink_entry_of(f.entry)); }
    void pipe_done(uint64_t size) override {
        SinkEntry e = out_->entry();
        e.size = size;
        sink_.entry_done(e);
    }

private:
    Sink& sink_;
};

class OutputFdTarget final : public RecvTarget {
public:
    explicit OutputFdTarget(int fd) {
        int fl = ::fcntl(fd, F_GETFL);
        if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY)
            throw Error(ErrorCode::usage, "output fd " + std::to_string(fd) + " is not open for writing");
        out_ = std::make_unique<OrderedOutput>(fd);
    }

    void check_kind(const wire::ManifestEntry& e) const override {
        if (!is_pipe(e))
            throw Error(ErrorCode::usage,
                        "the sender sends files ('" + e.path +
                            "'), but this receiver writes one byte stream to its output: receive files with `sluice recv DIR`");
    }
    std::unique_ptr<StreamReceiver> open_stream(int sock, unsigned index, RecvContext& ctx, const tls::LinkKeys*) override {
        return make_pipe_to_fd_receiver(sock, index, ctx, *out_);
    }
    std::string data_path() const override { return "pipe_splice"; }
};

} // namespace

std::unique_ptr<RecvTarget> RecvTarget::directory(const std::filesystem::path& dir, RecvPath path) {
    return std::make_unique<DirectoryTarget>(dir, path);
}
std::unique_ptr<RecvTarget> RecvTarget::sink(Sink& sink) { return std::make_unique<SinkTarget>(sink); }
std::unique_ptr<RecvTarget> RecvTarget::output_fd(int fd) { return std::make_unique<OutputFdTarget>(fd); }

} // namespace sluice
