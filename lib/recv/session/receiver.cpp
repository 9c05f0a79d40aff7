// The receiving side of a transfer (docs/design.md). The thread in wait() accepts and
// authenticates connections without blocking on any of them (a bounded set of pending
// handshakes, each with a deadline); the control thread registers the manifest and decides
// the final status; one thread per data stream runs the chosen receive path.
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <map>
#include <thread>
#include <unordered_set>

#include "core/io/file_times.hpp"
#include "core/io/socket.hpp"
#include "core/io/sys_error.hpp"
#include "recv/paths/chunk_receiver.hpp"
#include "recv/paths/ordered_output.hpp"
#include "recv/paths/stream_receiver.hpp"
#include "core/ring/ring.hpp"
#include "sluice/sluice.hpp"
#include "core/stats/process_usage.hpp"
#include "recv/store/dest_tree.hpp"
#include "recv/store/file_table.hpp"
#include "core/wire/frame_io.hpp"
#include "recv/store/journal.hpp"
#include "core/wire/auth.hpp"
#include "core/wire/codec.hpp"

namespace sluice {

namespace {

constexpr size_t kMaxPendingHandshakes = 256;
constexpr int kHandshakeDeadlineMs = 10000;

struct PendingConnection {
    UniqueFd fd;
    std::array<unsigned char, wire::kNonceBytes> nonce{};
    std::array<unsigned char, wire::kClientHelloBytes> hello{};
    size_t got = 0;
    Clock::time_point deadline;
};

// Where received bytes go: a directory, a caller's Sink, or (stream mode) a caller's fd.
struct Target {
    std::filesystem::path dir;
    Sink* sink = nullptr;
    int out_fd = -1;
    bool is_dir() const { return !sink && out_fd < 0; }
};

} // namespace

struct Receiver::Impl {
    RecvOptions opts;
    Target target;
    DestTree tree;
    std::unique_ptr<OrderedOutput> stream_out; // stream transfers (fd or sink targets)
    RecvFile* stream_entry = nullptr;
    UniqueFd listener;
    UniqueFd wake;
    std::string token;
    uint16_t port = 0;
    std::string host;
    std::atomic<bool> cancelled{false};

    // The transfer being served (set by the first authenticated control connection).
    bool started = false;
    std::array<unsigned char, wire::kTransferIdBytes> transfer_id{};
    uint16_t stream_count = 0;
    std::vector<bool> stream_seen;
    UniqueFd control;
    std::vector<UniqueFd> data;
    std::thread control_thread;
    std::vector<std::thread> data_threads;
    Clock::time_point t0;

    FileTable files;
    std::atomic<uint64_t> bytes_received{0};
    std::atomic<uint64_t> files_completed{0};
    std::atomic<uint64_t> bytes_verified_from_disk{0};
    RecvContext ctx;

    std::mutex mu; // guards everything below
    std::condition_variable cv;
    unsigned streams_ended = 0;
    uint64_t blocks_received = 0, data_bytes = 0;
    std::optional<Error> failure;
    std::vector<std::string> fallbacks;
    std::map<std::pair<uint64_t, uint64_t>, int> resends; // (file id, offset) -> times asked
    uint64_t checksum_failures = 0;
    std::atomic<uint64_t> files_expected{UINT64_MAX}; // set at MANIFEST_END
    std::atomic<bool> all_verified_sent{false};
    bool done = false;
    std::mutex control_write_mu;

    // Manifest bookkeeping (control thread only).
    std::unordered_set<std::string> paths;
    std::vector<RecvFile*> dirs, links;
    uint64_t n_files = 0, n_dirs = 0, n_links = 0, total_bytes = 0, bytes_skipped = 0;
    uint32_t chunks = 0;
    bool manifest_ended = false;
    std::string last_parent = "\x01"; // no real path equals this

    Impl(Target t, RecvOptions o)
        : opts(std::move(o)), target(std::move(t)), tree(target.is_dir() ? DestTree(target.dir) : DestTree()), files(opts.max_files),
          ctx{files, tree, opts.sync, opts.verify, opts.idle_timeout_ms, opts.progress, bytes_received, files_completed,
              bytes_verified_from_disk, {}, {}} {
        ctx.block_failed = [this](RecvFile& f, uint64_t off, uint64_t len) { on_block_failed(f, off, len); };
        ctx.file_completed = [this] { maybe_all_verified(); };
        if (target.out_fd >= 0) {
            int fl = ::fcntl(target.out_fd, F_GETFL);
            if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY)
                throw Error(ErrorCode::usage, "output fd " + std::to_string(target.out_fd) + " is not open for writing");
            stream_out = std::make_unique<OrderedOutput>(target.out_fd);
        } else if (target.sink) {
            stream_out = std::make_unique<OrderedOutput>(*target.sink);
        }
        token = opts.token.empty() ? wire::random_token() : opts.token;
        listener = listen_tcp(opts.bind_address, opts.port);
        port = local_port(listener.get());
        // The accept loop drains bursts of connections and must never block on accept.
        ::fcntl(listener.get(), F_SETFL, ::fcntl(listener.get(), F_GETFL) | O_NONBLOCK);
        host = !opts.advertise_host.empty() ? opts.advertise_host
               : (!opts.bind_address.empty() && opts.bind_address != "0.0.0.0" && opts.bind_address != "::")
                   ? opts.bind_address
                   : primary_address();
        wake.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
        if (!wake) throw_errno(ErrorCode::internal, "eventfd");
    }

    void log(const std::string& line) {
        if (opts.log) opts.log(line);
    }
    void notify_wake() {
        uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(wake.get(), &one, sizeof one);
    }

    // ---------------- failure: first error wins, everyone else is unblocked ----------------
    void fail(const Error& e) {
        {
            std::lock_guard lk(mu);
            if (failure || done) return;
            failure = e;
        }
        cv.notify_all();
        if (stream_out) stream_out->stop();
        if (control) {
            try {
                std::lock_guard lk(control_write_mu);
                wire::Bytes out;
                wire::encode_abort(out, {1, e.what()});
                send_all(control.get(), out, "aborting");
            } catch (const Error&) {
            }
            ::shutdown(control.get(), SHUT_RDWR);
        }
        for (auto& d : data)
            if (d) ::shutdown(d.get(), SHUT_RDWR);
        notify_wake();
    }

    bool started_unlocked() {
        std::lock_guard lk(mu);
        return started;
    }

    bool finished() {
        std::lock_guard lk(mu);
        return done || failure.has_value();
    }

    // ---------------- accepting and authenticating ----------------
    void accept_loop() {
        std::deque<PendingConnection> pending;
        while (!finished()) {
            if (cancelled) {
                fail(Error(ErrorCode::cancelled, "receive cancelled"));
                break;
            }
            std::vector<pollfd> pfds;
            pfds.push_back({wake.get(), POLLIN, 0});
            pfds.push_back({listener.get(), POLLIN, 0});
            for (auto& p : pending) pfds.push_back({p.fd.get(), POLLIN, 0});
            int timeout = -1;
            auto now = Clock::now();
            for (auto& p : pending) {
                int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(p.deadline - now).count());
                timeout = timeout < 0 ? std::max(ms, 0) : std::min(timeout, std::max(ms, 0));
            }
            if (started_unlocked() && (timeout < 0 || timeout > 1000)) timeout = 1000;
            int rc = ::poll(pfds.data(), pfds.size(), timeout);
            if (rc < 0 && errno != EINTR) throw_errno(ErrorCode::internal, "poll");
            if (pfds[0].revents) {
                uint64_t v;
                [[maybe_unused]] ssize_t n = ::read(wake.get(), &v, sizeof v);
            }
            // Progress on pending handshakes first (their indices match pfds[2...]).
            now = Clock::now();
            for (size_t i = 0; i < pending.size();) {
                short re = pfds.size() > i + 2 ? pfds[i + 2].revents : 0;
                bool drop = now >= pending[i].deadline;
                if (!drop && re) drop = !advance_handshake(pending[i]);
                if (drop) {
                    pending.erase(pending.begin() + static_cast<long>(i));
                    pfds.erase(pfds.begin() + static_cast<long>(i) + 2);
                } else {
                    ++i;
                }
            }
            if (pfds[1].revents & POLLIN) accept_new(pending);
            check_streams_connected();
        }
    }

    // A transfer whose data streams do not all arrive within the idle timeout cannot finish.
    void check_streams_connected() {
        unsigned connected;
        {
            std::lock_guard lk(mu);
            if (!started) return;
            connected = static_cast<unsigned>(std::count(stream_seen.begin(), stream_seen.end(), true));
            if (connected == stream_count) return;
        }
        if (seconds_since(t0) * 1000 < opts.idle_timeout_ms) return;
        fail(Error(ErrorCode::network,
                   "only " + std::to_string(connected) + " of " + std::to_string(stream_count) +
                       " data streams connected within the idle timeout",
                   ErrorCause::timed_out));
    }

    void accept_new(std::deque<PendingConnection>& pending) {
        for (int burst = 0; burst < 64; ++burst) {
            int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (fd < 0) return;
            PendingConnection p;
            p.fd.reset(fd);
            p.deadline = Clock::now() + std::chrono::milliseconds(kHandshakeDeadlineMs);
            wire::random_bytes(p.nonce);
            wire::ServerHello hello;
            hello.nonce = p.nonce;
            wire::Bytes out;
            wire::encode_server_hello(out, hello);
            if (::send(fd, out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size())) continue;
            // Bounded: a flood of silent connections evicts the oldest, never exhausts fds.
            if (pending.size() >= kMaxPendingHandshakes) pending.pop_front();
            pending.push_back(std::move(p));
        }
    }

    // Returns false when the connection is finished with (handed over or refused).
    bool advance_handshake(PendingConnection& p) {
        ssize_t n = ::recv(p.fd.get(), p.hello.data() + p.got, p.hello.size() - p.got, 0);
        if (n <= 0) return n < 0 && (errno == EAGAIN || errno == EINTR);
        p.got += static_cast<size_t>(n);
        if (p.got < p.hello.size()) return true;
        wire::ClientHello h;
        try {
            h = wire::decode_client_hello(p.hello);
        } catch (const Error& e) {
            if (opts.verbose) log(std::string("refused a connection: ") + e.what());
            return false;
        }
        if (h.version != wire::kVersion) return refuse(p, wire::AuthStatus::bad_version);
        auto expected = wire::client_hello_mac(token, p.nonce, wire::client_hello_signed_part(p.hello));
        if (!wire::macs_equal(expected, h.mac)) {
            log("warning: refused a connection: wrong token");
            return refuse(p, wire::AuthStatus::bad_token);
        }
        std::lock_guard lk(mu);
        if (h.role == wire::Role::control) {
            if (started) return refuse(p, wire::AuthStatus::other_transfer);
            if (!accept_stream(p, h)) return false;
            start_session(h, std::move(p.fd));
            return false;
        }
        if (!started || h.transfer_id != transfer_id) return refuse(p, wire::AuthStatus::other_transfer);
        if (h.stream_count != stream_count || stream_seen[h.stream_index]) return refuse(p, wire::AuthStatus::bad_stream);
        if (!accept_stream(p, h)) return false;
        stream_seen[h.stream_index] = true;
        start_data_stream(h.stream_index, std::move(p.fd));
        return false;
    }

    bool refuse(PendingConnection& p, wire::AuthStatus why) {
        wire::ServerAuth a;
        a.status = why;
        wire::Bytes out;
        wire::encode_server_auth(out, a);
        [[maybe_unused]] ssize_t n = ::send(p.fd.get(), out.data(), out.size(), MSG_NOSIGNAL);
        return false;
    }

    bool accept_stream(PendingConnection& p, const wire::ClientHello& h) {
        wire::ServerAuth a;
        a.mac = wire::server_auth_mac(token, h.nonce, p.nonce);
        wire::Bytes out;
        wire::encode_server_auth(out, a);
        int flags = ::fcntl(p.fd.get(), F_GETFL);
        ::fcntl(p.fd.get(), F_SETFL, flags & ~O_NONBLOCK);
        set_io_timeout(p.fd.get(), opts.idle_timeout_ms);
        try {
            send_all(p.fd.get(), out, "handshake");
        } catch (const Error&) {
            return false;
        }
        return true;
    }

    void start_session(const wire::ClientHello& h, UniqueFd fd) {
        started = true;
        t0 = Clock::now();
        transfer_id = h.transfer_id;
        stream_count = h.stream_count;
        stream_seen.assign(stream_count + 1u, false);
        data.resize(stream_count + 1u);
        if (opts.progress) opts.progress->stream_count = stream_count;
        // Until the manifest has ended the sender must keep talking; after that the control
        // connection is quiet while data flows (the data streams have their own timeouts).
        set_io_timeout(fd.get(), opts.idle_timeout_ms);
        set_nodelay(fd.get());
        control = std::move(fd);
        if (opts.verbose) log("transfer started: " + std::to_string(stream_count) + " data streams");
        control_thread = std::thread([this] { control_main(); });
    }

    void start_data_stream(uint16_t index, UniqueFd fd) {
        data[index] = std::move(fd);
        int sock = data[index].get();
        data_threads.emplace_back([this, index, sock] { data_main(index, sock); });
    }

    // ---------------- data streams ----------------
    void data_main(unsigned index, int sock) {
        StreamProgress* sp = opts.progress ? &opts.progress->streams[index - 1] : nullptr;
        try {
            if (sp) sp->state = StreamState::moving;
            // A reader of our output fd that goes away must fail the transfer, not kill the
            // process: SIGPIPE stays pending on this thread and dies with it.
            sigset_t pipe_signal;
            sigemptyset(&pipe_signal);
            sigaddset(&pipe_signal, SIGPIPE);
            pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
            auto rx = target.out_fd >= 0 ? make_stream_to_fd_receiver(sock, ctx, *stream_out)
                      : target.sink      ? make_sink_receiver(sock, ctx, *target.sink, *stream_out)
                                         : make_stream_receiver(opts.path, sock, index, ctx);
            StreamReceipt r = rx->run();
            if (sp) {
                sp->bytes = r.bytes;
                sp->state = StreamState::done;
            }
            {
                std::lock_guard lk(mu);
                if (auto fb = rx->fallback(); !fb.empty() && std::find(fallbacks.begin(), fallbacks.end(), fb) == fallbacks.end()) {
                    fallbacks.push_back(fb);
                    if (opts.verbose) log("slower path: " + fb);
                }
                ++streams_ended;
                blocks_received += r.blocks;
                data_bytes += r.bytes;
            }
            cv.notify_all();
        } catch (const Error& e) {
            if (sp) sp->state = StreamState::failed;
            fail(e);
        }
    }

    // ---------------- control ----------------
    void send_control(const wire::Bytes& out) {
        std::lock_guard lk(control_write_mu);
        write_frame(control.get(), out, "control connection");
    }

    void control_main() {
        try {
            for (;;) {
                Frame f = read_frame(control.get(), "control connection");
                switch (f.type()) {
                case wire::FrameType::manifest: on_manifest(wire::decode_manifest(f.payload)); break;
                case wire::FrameType::manifest_end: on_manifest_end(wire::decode_manifest_end(f.payload)); break;
                case wire::FrameType::transfer_end: on_transfer_end(wire::decode_transfer_end(f.payload)); return;
                case wire::FrameType::abort: {
                    wire::Abort a = wire::decode_abort(f.payload);
                    if (a.code == wire::kAbortSourceTruncated)
                        throw Error(ErrorCode::source, "sender: " + a.message, ErrorCause::peer_aborted);
                    throw Error(ErrorCode::network, "sender aborted the transfer: " + a.message, ErrorCause::peer_aborted);
                }
                default:
                    throw Error(ErrorCode::protocol, std::string(wire::frame_type_name(f.header.type)) +
                                                         " frame is not allowed from the sender on the control connection");
                }
            }
        } catch (const Error& e) {
            if (!finished() && e.cause() == ErrorCause::peer_closed)
                fail(Error(ErrorCode::network, "sender disconnected before the transfer was complete", ErrorCause::peer_closed));
            else if (!finished() && e.cause() == ErrorCause::timed_out)
                fail(Error(ErrorCode::network,
                           "the sender went silent for " + std::to_string(opts.idle_timeout_ms / 1000) +
                               " s on the control connection (idle timeout)",
                           ErrorCause::timed_out));
            else
                fail(e);
        }
    }

    void on_manifest(wire::ManifestChunk&& chunk) {
        if (manifest_ended) throw Error(ErrorCode::protocol, "MANIFEST after MANIFEST_END");
        if (chunk.seq != chunks) throw Error(ErrorCode::protocol, "manifest chunk " + std::to_string(chunk.seq) + " out of order");
        ++chunks;
        wire::ManifestAck ack;
        ack.seq = chunk.seq;
        for (auto& e : chunk.entries) register_entry(std::move(e), ack.verified);
        files.publish();
        wire::Bytes out;
        wire::encode_manifest_ack(out, ack);
        send_control(out);
    }

    void register_entry(wire::ManifestEntry&& e, std::vector<wire::ByteRange>& already) {
        if (!paths.insert(e.path).second) throw Error(ErrorCode::protocol, "manifest lists '" + e.path + "' twice");
        check_entry_fits_target(e);
        const bool write = writes_files();
        RecvFile& f = files.append(std::move(e));
        if (write && f.parent != last_parent) {
            tree.make_dirs(f.parent);
            last_parent = f.parent;
        }
        switch (f.entry.kind) {
        case wire::EntryKind::stream:
            if (opts.progress) opts.progress->is_stream = true;
            stream_entry = &f;
            stream_out->set_entry(sink_entry_of(f.entry));
            break;
        case wire::EntryKind::directory:
            ++n_dirs;
            if (write) tree.make_dirs(f.entry.path);
            dirs.push_back(&f);
            break;
        case wire::EntryKind::symlink:
            ++n_links;
            links.push_back(&f);
            break;
        case wire::EntryKind::file:
            ++n_files;
            total_bytes += f.entry.size;
            if (opts.progress) {
                opts.progress->bytes_total += f.entry.size;
                opts.progress->files_total += 1;
            }
            if (write && resume_file(f, already)) break;
            if (f.entry.size == 0) finish_empty_file(f, write);
            break;
        }
    }

    bool writes_files() const { return target.is_dir() && opts.path != RecvPath::null_sink; }

    // A stream transfer is one stream entry; a directory takes files, an fd takes one stream.
    void check_entry_fits_target(const wire::ManifestEntry& e) {
        const bool stream = e.kind == wire::EntryKind::stream;
        if (stream && target.is_dir())
            throw Error(ErrorCode::usage, "the sender sends a byte stream ('" + e.path + "'), but this receiver writes files into '" +
                                              tree.display() + "': receive streams with `sluice recv --stdout`");
        if (!stream && target.out_fd >= 0)
            throw Error(ErrorCode::usage, "the sender sends files ('" + e.path +
                                              "'), but this receiver writes one byte stream to its output: receive files with `sluice recv DIR`");
        if (stream_entry || (stream && files.size() > 0))
            throw Error(ErrorCode::protocol, "a stream must be the only entry of its transfer");
    }

    // What an earlier run of the same transfer left: the file complete under its final name
    // (same size and mtime: sluice sets the mtime only after verifying every block), or a
    // journal of verified ranges beside its temporary file. Returns true if f is complete.
    bool resume_file(RecvFile& f, std::vector<wire::ByteRange>& already) {
        UniqueFd dir = tree.open_dir(f.parent);
        struct stat st{};
        if (::fstatat(dir.get(), f.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
            static_cast<uint64_t>(st.st_size) == f.entry.size &&
            static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec == f.entry.mtime_ns) {
            if (f.entry.size) already.push_back({f.entry.file_id, 0, f.entry.size});
            bytes_skipped += f.entry.size;
            files.set_complete(f);
            files_completed.fetch_add(1, std::memory_order_relaxed);
            if (opts.progress) {
                opts.progress->files_done += 1;
                opts.progress->bytes_done += f.entry.size;
            }
            return true;
        }
        if (f.entry.size == 0) return false;
        journal::Contents journal = journal::load(dir.get(), f.temp, f.entry.size, f.entry.mtime_ns);
        if (journal.ranges.empty()) {
            journal::remove(dir.get(), f.temp); // another version of the file, or nothing verified
            return false;
        }
        // --verify reads the blocks an earlier run received back from disk as well, against
        // the checksums the sender sent then.
        if (opts.verify)
            for (auto& b : journal.blocks) files.record_checksum(f, b.offset, b.length, b.checksum);
        for (auto [b, e] : journal.ranges) {
            files.mark_verified(f, b, e - b);
            already.push_back({f.entry.file_id, b, e - b});
            bytes_skipped += e - b;
            if (opts.progress) opts.progress->bytes_done += e - b;
        }
        f.journaled = true;
        return false;
    }

    static constexpr int kMaxResends = 3;

    void on_block_failed(RecvFile& f, uint64_t off, uint64_t len) {
        int times;
        {
            std::lock_guard lk(mu);
            ++checksum_failures;
            times = ++resends[{f.entry.file_id, off}];
        }
        if (times > kMaxResends)
            throw Error(ErrorCode::integrity, "checksum mismatch in '" + f.entry.path + "' at offset " + std::to_string(off) + " (" +
                                                  std::to_string(len) + " bytes), still wrong after " + std::to_string(kMaxResends) +
                                                  " resends");
        log("warning: checksum mismatch in '" + f.entry.path + "' at offset " + std::to_string(off) + ": asking the sender again");
        wire::Bytes out;
        wire::encode_resend(out, {f.entry.file_id, off, len});
        send_control(out);
    }

    // Once the manifest has ended and every file is complete, the sender may end its streams.
    void maybe_all_verified() {
        if (files_completed.load() < files_expected.load()) return;
        if (all_verified_sent.exchange(true)) return;
        wire::Bytes out;
        wire::encode_all_verified(out);
        send_control(out);
    }

    void finish_empty_file(RecvFile& f, bool write) {
        if (target.sink) target.sink->entry_done(sink_entry_of(f.entry));
        if (write) {
            ParentDirCache dirs_cache(tree);
            UniqueFd fd = open_temp_file(dirs_cache, f);
            finish_file(dirs_cache, f, fd.get(), opts.sync);
        }
        files.set_complete(f);
        files_completed.fetch_add(1, std::memory_order_relaxed);
        if (opts.progress) opts.progress->files_done += 1;
    }

    void on_manifest_end(const wire::ManifestEnd& e) {
        if (e.chunk_count != chunks || e.file_count != files.size() || e.total_bytes != total_bytes)
            throw Error(ErrorCode::protocol, "MANIFEST_END announces " + std::to_string(e.file_count) + " entries in " +
                                                 std::to_string(e.chunk_count) + " chunks, but " + std::to_string(files.size()) +
                                                 " arrived in " + std::to_string(chunks));
        manifest_ended = true;
        set_io_timeout(control.get(), 0);
        if (opts.progress) opts.progress->walk_done = true;
        files_expected = n_files;
        maybe_all_verified();
    }

    void on_transfer_end(const wire::TransferEnd& end) {
        if (!manifest_ended) throw Error(ErrorCode::protocol, "TRANSFER_END before MANIFEST_END");
        if (end.data_streams != stream_count) throw Error(ErrorCode::protocol, "TRANSFER_END names a different stream count");
        {
            std::unique_lock lk(mu);
            bool all = cv.wait_for(lk, std::chrono::milliseconds(opts.idle_timeout_ms),
                                   [&] { return streams_ended == stream_count || failure.has_value(); });
            if (failure) return;
            if (!all)
                throw Error(ErrorCode::network,
                            "only " + std::to_string(streams_ended) + " of " + std::to_string(stream_count) +
                                " data streams ended within the idle timeout",
                            ErrorCause::timed_out);
            if (blocks_received != end.blocks || data_bytes != end.bytes)
                throw Error(ErrorCode::protocol, "sender reports " + std::to_string(end.bytes) + " bytes sent, " +
                                                     std::to_string(data_bytes) + " arrived");
        }
        if (stream_entry) {
            uint64_t got = stream_out->delivered();
            if (got != end.bytes)
                throw Error(ErrorCode::protocol, "the stream is incomplete: " + std::to_string(got) + " of " + std::to_string(end.bytes) +
                                                     " bytes arrived");
            if (target.sink) {
                SinkEntry e = stream_out->entry();
                e.size = got;
                target.sink->entry_done(e);
            }
        }
        for (uint64_t id = 0; id < files.size(); ++id) {
            RecvFile& f = files.at(id);
            if (f.entry.kind == wire::EntryKind::file && !files.is_complete(f))
                throw Error(ErrorCode::protocol, "'" + f.entry.path + "' is incomplete: " + std::to_string(f.verified_bytes) +
                                                     " of " + std::to_string(f.entry.size) + " bytes arrived");
        }
        if (writes_files()) {
            make_symlinks();
            apply_dir_metadata();
        }
        wire::FinalStatus st;
        st.files_ok = files_completed.load();
        st.bytes = bytes_received.load();
        st.message = "complete";
        wire::Bytes out;
        wire::encode_final_status(out, st);
        {
            std::lock_guard lk(mu);
            if (failure) return;
            done = true;
        }
        try {
            send_control(out);
        } catch (const Error&) {
            // The files are complete and in place; a sender gone before reading our verdict
            // does not change that.
        }
        notify_wake();
    }

    // Symlinks are made last, so no path of this transfer can be resolved through one.
    void make_symlinks() {
        for (RecvFile* l : links) {
            UniqueFd dir = tree.open_dir(l->parent);
            ::unlinkat(dir.get(), l->temp.c_str(), 0);
            if (::symlinkat(l->entry.link_target.c_str(), dir.get(), l->temp.c_str()) != 0)
                throw_errno(ErrorCode::destination, "cannot create symlink '" + l->entry.path + "'");
            ::utimensat(dir.get(), l->temp.c_str(), FileTimes(l->entry.mtime_ns).t, AT_SYMLINK_NOFOLLOW);
            if (::renameat(dir.get(), l->temp.c_str(), dir.get(), l->name.c_str()) != 0)
                throw_errno(ErrorCode::destination, "cannot put symlink '" + l->entry.path + "' in place");
        }
    }

    // Deepest first: setting a parent's mtime before its children are done would be undone.
    void apply_dir_metadata() {
        for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
            RecvFile* d = *it;
            UniqueFd fd = tree.open_dir(d->entry.path);
            ::fchmod(fd.get(), d->entry.mode & 0777);
            if (::futimens(fd.get(), FileTimes(d->entry.mtime_ns).t) != 0) throw_errno(ErrorCode::destination, "cannot set the mtime of '" + d->entry.path + "'");
            if (opts.sync && ::fsync(fd.get()) != 0) throw_errno(ErrorCode::destination, "cannot fsync '" + d->entry.path + "'");
        }
        if (opts.sync) {
            UniqueFd root = tree.open_dir("");
            if (::fsync(root.get()) != 0) throw_errno(ErrorCode::destination, "cannot fsync '" + tree.display() + "'");
        }
    }

    // After a failure nothing incomplete may look complete. Partial files with a journal are
    // kept for a resume (running the same transfer again), unless the destination itself
    // failed (disk full, permissions): then every temporary file goes, freeing the space.
    void remove_partial_files(bool keep_journaled) {
        if (!writes_files()) return;
        for (uint64_t id = 0; id < files.size(); ++id) {
            RecvFile& f = files.at(id);
            if (f.entry.kind != wire::EntryKind::file || files.is_complete(f)) continue;
            if (keep_journaled && f.journaled) continue;
            try {
                UniqueFd dir = tree.open_dir(f.parent);
                ::unlinkat(dir.get(), f.temp.c_str(), 0);
                journal::remove(dir.get(), f.temp);
            } catch (const Error&) {
            }
        }
    }

    Stats wait() {
        try {
            accept_loop();
        } catch (const Error& e) {
            fail(e);
        }
        if (control_thread.joinable()) control_thread.join();
        for (auto& t : data_threads) t.join();
        data_threads.clear();
        std::optional<Error> err;
        {
            std::lock_guard lk(mu);
            err = failure;
        }
        if (err) {
            remove_partial_files(err->code() != ErrorCode::destination);
            throw *err;
        }
        Stats s;
        s.role = "recv";
        s.bytes = total_bytes;
        s.bytes_sent = bytes_received.load();
        s.bytes_skipped = bytes_skipped;
        s.checksum_failures = checksum_failures;
        s.bytes_verified_from_disk = bytes_verified_from_disk.load();
        s.files = n_files;
        s.dirs = n_dirs;
        s.symlinks = n_links;
        s.blocks = blocks_received;
        s.seconds = seconds_since(t0);
        s.streams = stream_count;
        s.data_path = target.out_fd >= 0 ? "stream_splice" : target.sink ? "sink" : recv_path_name(opts.path);
        if (stream_entry) s.bytes = stream_out->delivered();
        s.ring_mode = probe_ring_features().setup_mode();
        s.fallbacks = fallbacks;
        auto u = ProcessUsage::now();
        s.cpu_user_s = u.user_s;
        s.cpu_sys_s = u.sys_s;
        s.peak_rss_kb = static_cast<uint64_t>(u.peak_rss_kb);
        return s;
    }
};

Receiver::Receiver(const std::filesystem::path& dir, RecvOptions options)
    : impl_(std::make_unique<Impl>(Target{dir, nullptr, -1}, std::move(options))) {}
Receiver::Receiver(Sink& sink, RecvOptions options) : impl_(std::make_unique<Impl>(Target{{}, &sink, -1}, std::move(options))) {}
Receiver::Receiver(OutputFd out, RecvOptions options) : impl_(std::make_unique<Impl>(Target{{}, nullptr, out.fd}, std::move(options))) {}
Receiver::~Receiver() {
    if (impl_) {
        impl_->cancelled = true;
        impl_->notify_wake();
        impl_->fail(Error(ErrorCode::cancelled, "receiver destroyed"));
        if (impl_->control_thread.joinable()) impl_->control_thread.join();
        for (auto& t : impl_->data_threads) t.join();
    }
}

std::string Receiver::url() const { return format_url({impl_->host, impl_->port, impl_->token}); }
uint16_t Receiver::port() const { return impl_->port; }
Stats Receiver::wait() { return impl_->wait(); }
void Receiver::cancel() {
    impl_->cancelled = true;
    impl_->notify_wake();
}

} // namespace sluice
