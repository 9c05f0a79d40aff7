// Each receive path driven in-process over a socketpair: a hand-written sender writes frames
// into one end, the path reads the other into a temporary directory, as receiver.cpp runs it.
#include <doctest/doctest.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <linux/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "core/checksum/xxh3.hpp"
#include "core/wire/codec.hpp"
#include "recv/paths/pipe_receiver.hpp"
#include "recv/paths/stream_receiver.hpp"

using namespace sluice;
namespace fs = std::filesystem;

namespace {

struct TempDir {
    fs::path path;
    TempDir() {
        std::string t = (fs::temp_directory_path() / "sluice-paths-XXXXXX").string();
        REQUIRE(::mkdtemp(t.data()));
        path = t;
    }
    ~TempDir() { fs::remove_all(path); }
};

// What a data connection carries, built frame by frame.
struct Wire {
    wire::Bytes bytes;
    uint64_t blocks = 0, data = 0;
    Wire& block(uint64_t id, uint64_t offset, const std::string& d, bool good_checksum = true) {
        unsigned char pre[wire::kFrameHeaderBytes + wire::kBlockPrefixBytes];
        uint64_t sum = xxh3_64(d.data(), d.size()) ^ (good_checksum ? 0 : 1);
        wire::encode_block_prefix(pre, {id, offset, sum}, static_cast<uint32_t>(d.size()));
        bytes.insert(bytes.end(), pre, pre + sizeof pre);
        bytes.insert(bytes.end(), d.begin(), d.end());
        ++blocks;
        data += d.size();
        return *this;
    }
    Wire& raw(const wire::Bytes& b) {
        bytes.insert(bytes.end(), b.begin(), b.end());
        return *this;
    }
    Wire& end() { return end_with(blocks, data); }
    Wire& end_with(uint64_t b, uint64_t d) {
        wire::encode_stream_end(bytes, {b, d});
        return *this;
    }
};

struct Harness {
    TempDir dir;
    DestTree tree{dir.path};
    FileTable files{1000};
    std::atomic<uint64_t> received{0}, completed{0}, from_disk{0};
    std::vector<uint64_t> failed_offsets;
    RecvContext ctx{files, tree, false, false, 10000, nullptr, received, completed, from_disk, {}, {}};

    Harness() {
        ctx.block_failed = [this](RecvFile&, uint64_t off, uint64_t) { failed_offsets.push_back(off); };
    }

    void add(uint64_t id, const std::string& path, uint64_t size, wire::EntryKind kind = wire::EntryKind::file) {
        wire::ManifestEntry e;
        e.file_id = id;
        e.size = size;
        e.mode = 0644;
        e.mtime_ns = 1'700'000'000'000'000'000;
        e.kind = kind;
        e.path = path;
        RecvFile& f = files.append(std::move(e));
        if (kind == wire::EntryKind::file) tree.make_dirs(f.parent);
        files.publish();
    }

    std::string read(const std::string& rel) {
        std::ifstream in(dir.path / rel, std::ios::binary);
        REQUIRE(in);
        return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    }

    // Runs rx over one end of a socketpair while a thread writes w into the other.
    StreamReceipt run(const Wire& w, const std::function<std::unique_ptr<StreamReceiver>(int)>& make) {
        int sv[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        std::thread writer([&] {
            size_t done = 0;
            while (done < w.bytes.size()) {
                ssize_t n = ::send(sv[1], w.bytes.data() + done, w.bytes.size() - done, MSG_NOSIGNAL);
                if (n <= 0) break; // the receiver gave up on a bad frame and closed its end
                done += static_cast<size_t>(n);
            }
            ::shutdown(sv[1], SHUT_WR);
        });
        struct Closer {
            int* sv;
            std::thread& t;
            ~Closer() {
                ::shutdown(sv[0], SHUT_RDWR);
                t.join();
                ::close(sv[0]);
                ::close(sv[1]);
            }
        } closer{sv, writer};
        return make(sv[0])->run();
    }
    StreamReceipt run(const Wire& w, RecvPath path) {
        return run(w, [&](int sock) { return make_stream_receiver(path, sock, 1, ctx); });
    }
};

std::string pattern(size_t n, unsigned seed) {
    std::string s(n, '\0');
    for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + seed * 7 + (i >> 12)) & 0xff);
    return s;
}

const RecvPath kPaths[] = {RecvPath::direct, RecvPath::recv_write, RecvPath::splice, RecvPath::discard};

// The error a path gives for a stream, with its code; empty if it ran through.
std::string error_of(Harness& h, const Wire& w, RecvPath path, ErrorCode want = ErrorCode::protocol,
                     ErrorCause cause = ErrorCause::none) {
    try {
        h.run(w, path);
    } catch (const Error& e) {
        CHECK(e.code() == want);
        CHECK(e.cause() == cause);
        return e.what();
    }
    return {};
}

} // namespace

TEST_CASE("every receive path writes the blocks it is sent and counts the stream") {
    for (RecvPath path : kPaths) {
        CAPTURE(recv_path_name(path));
        Harness h;
        // Large enough for several 2 MiB buffers and an unaligned tail (the O_DIRECT path where
        // the file system allows it), plus a small file that arrives whole in one block.
        const std::string big = pattern((5u << 20) + 123, 1), small = pattern(1000, 2);
        h.add(0, "d", 0, wire::EntryKind::directory);
        h.add(1, "d/big", big.size());
        h.add(2, "d/small", small.size());
        Wire w;
        w.block(1, 0, big.substr(0, 3u << 20)).block(2, 0, small).block(1, 3u << 20, big.substr(3u << 20)).end();
        StreamReceipt r = h.run(w, path);
        CHECK(r.blocks == 3);
        CHECK(r.bytes == big.size() + small.size());
        CHECK(h.received == big.size() + small.size());
        CHECK(h.completed == 2);
        CHECK(h.failed_offsets.empty());
        if (path == RecvPath::discard) {
            CHECK_FALSE(fs::exists(h.dir.path / "d/big"));
            continue;
        }
        CHECK(h.read("d/big") == big);
        CHECK(h.read("d/small") == small);
    }
}

TEST_CASE("a block whose checksum fails is asked for again, not written as verified") {
    for (RecvPath path : kPaths) {
        CAPTURE(recv_path_name(path));
        Harness h;
        h.add(0, "f", 8192);
        Wire w;
        w.block(0, 0, pattern(4096, 3)).block(0, 4096, pattern(4096, 4), false).end();
        StreamReceipt r = h.run(w, path);
        CHECK(r.blocks == 2);
        CHECK(h.failed_offsets == std::vector<uint64_t>{4096});
        CHECK(h.completed == 0);
    }
}

TEST_CASE("every receive path refuses bad frames with the reader's words") {
    auto each_path = [](const std::function<void(RecvPath)>& check) {
        for (RecvPath path : kPaths) {
            CAPTURE(recv_path_name(path));
            check(path);
        }
    };
    SUBCASE("an unknown frame type") {
        each_path([](RecvPath path) {
            Harness h;
            h.add(0, "f", 10);
            wire::Bytes b(wire::kFrameHeaderBytes);
            wire::encode_frame_header(b.data(), static_cast<wire::FrameType>(0x7e), 0);
            Wire w;
            w.block(0, 0, "0123456789").raw(b);
            CHECK(error_of(h, w, path).find("unknown frame type 0x7e") != std::string::npos);
        });
    }
    SUBCASE("a control frame") {
        each_path([](RecvPath path) {
            Harness h;
            wire::Bytes b;
            wire::encode_manifest_end(b, {});
            Wire w;
            w.raw(b);
            CHECK(error_of(h, w, path) == "MANIFEST_END frame is not allowed on a data stream (data stream 1)");
        });
    }
    SUBCASE("an empty block") {
        each_path([](RecvPath path) {
            Harness h;
            h.add(0, "f", 10);
            Wire w;
            w.block(0, 0, "");
            CHECK(error_of(h, w, path) == "BLOCK frame without data on data stream 1");
        });
    }
    SUBCASE("STREAM_END with counts other than carried") {
        each_path([](RecvPath path) {
            Harness h;
            h.add(0, "f", 10);
            Wire w;
            w.block(0, 0, "0123456789").end_with(1, 11);
            CHECK(error_of(h, w, path) == "data stream 1 ended announcing 1 blocks / 11 bytes, but carried 1 / 10");
        });
    }
    SUBCASE("bytes after STREAM_END") {
        each_path([](RecvPath path) {
            Harness h;
            h.add(0, "f", 10);
            Wire w;
            w.block(0, 0, "0123456789").end().raw({0});
            CHECK(error_of(h, w, path) == "data after STREAM_END on data stream 1");
        });
    }
    SUBCASE("a stream that stops in the middle of a block") {
        each_path([](RecvPath path) {
            Harness h;
            h.add(0, "f", 10);
            Wire w;
            w.block(0, 0, "0123456789");
            w.bytes.resize(w.bytes.size() - 4);
            // The session tells a peer that hung up from other faults by this cause, not by text.
            CHECK_FALSE(error_of(h, w, path, ErrorCode::network, ErrorCause::peer_closed).empty());
        });
    }
}

TEST_CASE("pipe mode into an fd reads its frames through the same reader") {
    Harness h;
    h.add(0, "stdin", 0, wire::EntryKind::pipe);
    int out[2];
    REQUIRE(::pipe(out) == 0);
    OrderedOutput ordered(out[1]);
    const std::string a = pattern(70000, 5), b = pattern(5000, 6);
    SUBCASE("pieces in order reach the output") {
        Wire w;
        w.block(0, 0, a).block(0, a.size(), b).end();
        std::string got;
        std::thread reader([&] {
            char buf[65536];
            for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
        });
        StreamReceipt r = h.run(w, [&](int sock) { return make_pipe_to_fd_receiver(sock, 1, h.ctx, ordered); });
        ::close(out[1]);
        reader.join();
        CHECK(r.blocks == 2);
        CHECK(got == a + b);
    }
    SUBCASE("an empty piece is refused as on every other path") {
        Wire w;
        w.block(0, 0, "");
        CHECK_THROWS_WITH(h.run(w, [&](int sock) { return make_pipe_to_fd_receiver(sock, 1, h.ctx, ordered); }),
                          "BLOCK frame without data on data stream");
        ::close(out[1]);
    }
    ::close(out[0]);
}

namespace {

// A connected TCP pair over loopback: {receiver's end, sender's end}. A socketpair would not
// do here: AF_UNIX sockets ignore SO_RCVLOWAT when polled, TCP's honour it.
std::pair<int, int> tcp_pair() {
    int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(l >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(l, 1) == 0);
    REQUIRE(::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    int s = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
    REQUIRE(s >= 0);
    ::close(l);
    return {s, c};
}

// Bytes queued on sock that its reader has not taken, and whether it waits under a mark.
int queued(int sock) {
    int n = 0;
    return ::ioctl(sock, SIOCINQ, &n) == 0 ? n : -1;
}
int mark_of(int sock) {
    int m = 0;
    socklen_t len = sizeof m;
    return ::getsockopt(sock, SOL_SOCKET, SO_RCVLOWAT, &m, &len) == 0 ? m : -1;
}
uint64_t received_bytes(int sock) {
    tcp_info ti{};
    socklen_t len = sizeof ti;
    return ::getsockopt(sock, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 ? ti.tcpi_bytes_received : 0;
}

// Polls cond every millisecond for up to 20 s (the receive's idle timeout is 60 s, its mark's
// deadline 1 s: only a wait with no deadline but the idle timeout lasts this long).
bool within_20s(const std::function<bool()>& cond) {
    for (int i = 0; i < 20000; ++i) {
        if (cond()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
}

} // namespace

TEST_CASE("bytes below a receive's low-water mark are taken by its deadline, not left until more come") {
    // The sender stops inside a block with fewer bytes queued than the receiver's mark and
    // sends the rest only once those were taken: what a receive would meet if the bytes it
    // counts as owed were late. Without the mark's deadline they would sit until the idle timeout.
    for (RecvPath path : {RecvPath::direct, RecvPath::recv_write, RecvPath::discard}) {
        CAPTURE(recv_path_name(path));
        Harness h;
        h.ctx.idle_timeout_ms = 60000;
        const std::string data = pattern(1u << 20, 7);
        h.add(0, "f", data.size());
        Wire w;
        w.block(0, 0, data).end();
        auto [rx, tx] = tcp_pair();
        const size_t first = wire::kFrameHeaderBytes + wire::kBlockPrefixBytes + 100'000, second = first + 1000;
        bool waited_marked = false, taken = false;
        std::thread writer([&, tx = tx, rx = rx] {
            auto send_to = [&](size_t from, size_t to) {
                for (size_t done = from; done < to;) {
                    ssize_t n = ::send(tx, w.bytes.data() + done, to - done, MSG_NOSIGNAL);
                    if (n <= 0) return;
                    done += static_cast<size_t>(n);
                }
            };
            send_to(0, first);
            // All of it taken and the next receive waits under a mark (the block is owed).
            waited_marked = within_20s([&] { return received_bytes(rx) >= first && queued(rx) == 0 && mark_of(rx) > 1000; });
            send_to(first, second); // 1000 bytes, below the mark
            taken = within_20s([&] { return queued(rx) == 0; });
            send_to(second, w.bytes.size());
            ::shutdown(tx, SHUT_WR);
        });
        StreamReceipt r;
        try {
            r = make_stream_receiver(path, rx, 1, h.ctx)->run();
        } catch (...) {
            ::shutdown(rx, SHUT_RDWR);
            writer.join();
            ::close(rx);
            ::close(tx);
            throw;
        }
        writer.join();
        ::close(rx);
        ::close(tx);
        CHECK(waited_marked);
        CHECK(taken);
        CHECK(r.bytes == data.size());
        CHECK(h.completed == 1);
        if (path != RecvPath::discard) CHECK(h.read("f") == data);
    }
}
