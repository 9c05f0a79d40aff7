// Replays every input the fuzzer ever crashed on (tests/fuzz/regressions/), and the seeds'
// shapes, through the same entry point: each must now be handled without a crash.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "core/wire/codec_get.hpp"
#include "fuzz_entry.hpp"

TEST_CASE("fuzzer regressions stay fixed") {
    std::filesystem::path dir = SLUICE_FUZZ_REGRESSIONS;
    size_t n = 0;
    for (auto& f : std::filesystem::directory_iterator(dir)) {
        if (!f.is_regular_file() || f.path().filename() == "README.md") continue;
        std::ifstream in(f.path(), std::ios::binary);
        std::vector<unsigned char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        CAPTURE(f.path().string());
        fuzz_one(data.data(), data.size());
        ++n;
    }
    MESSAGE(n << " regression inputs replayed");
}

TEST_CASE("hand-made hostile inputs are refused without crashing") {
    std::vector<std::vector<unsigned char>> cases = {
        {0, 0x01, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f},    // manifest claiming 2 GiB
        {0, 0x10, 0, 0, 0, 1, 0, 0, 0},                // block shorter than its prefix
        {1, 0, 0x10, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, // data stream: 4 GiB block
        {4, 0, 0, 0, 0, 1, 0, 0, 0},                   // manifest: one entry, no bytes
        {1, 0, 0x10, 0, 0, 0, 24, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
         0, 0, 0,    0, 0, 0, 0,  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, // data stream: empty block
        {1, 3, 0x11, 0, 0, 0, 24, 0, 0, 0},                         // data stream: STREAM_END of 24 bytes
        {1, 0, 0x11, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0,
         0, 0, 0,    0, 0, 0, 0,  0, 0, 0, 0, 0, 0, 0x11},                                  // data stream: bytes after STREAM_END
        {1, 0, 0x11, 0, 0, 0, 16, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, // wrong counts
    };
    for (auto& c : cases) fuzz_one(c.data(), c.size());
}

TEST_CASE("get frames (selector 11): valid frames pass the round trip, hostile ones are refused") {
    using namespace sluice::wire;
    auto with_selector = [](const Bytes& frame) {
        std::vector<unsigned char> in{11};
        in.insert(in.end(), frame.begin(), frame.end());
        return in;
    };
    std::vector<Bytes> frames(6);
    encode_get_hello(frames[0], GetHello{});
    GetRequest q;
    q.streams = 2, q.reply_port = 1, q.receiver_token = "t", q.path = "a/b";
    encode_get_request(frames[1], q);
    encode_get_reply(frames[2], GetReply{GetStatus::busy, {}, 0, 0, "busy \x1b[2J"}); // escaped on decode
    encode_get_done(frames[3], GetDone{3, "disk full"});
    q.path = "../etc";
    encode_get_request(frames[4], q); // refused: '..'
    encode_get_done(frames[5], GetDone{0, ""});
    frames[5][6] = 0xff; // length beyond the 16 KiB bound (either byte order)
    for (const Bytes& f : frames) {
        auto in = with_selector(f);
        fuzz_one(in.data(), in.size()); // aborts if a property of get_frame() breaks
    }
}
