// Chunked request bodies (issue 15): the decoder fed whole and a byte at a time gives the same
// data and the same end; every malformed or oversized frame is refused (400); and how a head
// with Transfer-Encoding is framed or refused (400 for ambiguous framing, 501 for codings
// this server does not implement).
#include <doctest/doctest.h>

#include <string>

#include "serve/http/chunked.hpp"
#include "serve/http/request.hpp"

using namespace sluice::http;

namespace {

struct Decoded {
    std::string data;
    size_t used = 0; // of the input, up to the end of the body (or the error)
    int error = 0;
    bool done = false;
};

// Feeds `in` in pieces of `step` bytes (0: all at once), as the network would.
Decoded decode(const std::string& in, size_t step = 0) {
    ChunkedDecoder d;
    Decoded out;
    size_t fed = 0;
    while (fed < in.size() && !out.done && !out.error) {
        const size_t piece = step ? std::min(step, in.size() - fed) : in.size() - fed;
        size_t off = 0;
        while (off < piece) {
            const auto s = d.feed(in.data() + fed + off, piece - off);
            if (s.data_len) out.data.append(in, fed + off + s.data_off, s.data_len);
            off += s.used;
            if (s.error || s.done) {
                out.error = s.error;
                out.done = s.done;
                break;
            }
        }
        fed += off;
    }
    out.used = fed;
    return out;
}

} // namespace

TEST_CASE("a chunked body decodes the same whole and a byte at a time, and ends at its last chunk") {
    const std::string body = "5\r\nhello\r\n1;name=value;x\r\n,\r\nA\r\n0123456789\r\n0\r\nX-Sum: 1\r\n\r\nGET /next";
    for (size_t step : {size_t(0), size_t(1), size_t(2), size_t(7)}) {
        CAPTURE(step);
        Decoded d = decode(body, step);
        CHECK(d.error == 0);
        CHECK(d.done);
        CHECK(d.data == "hello,0123456789");
        CHECK(body.substr(d.used) == "GET /next"); // the next request is left alone
    }
    // upper-case hex, leading zeros, blanks before an extension, no trailers
    Decoded d = decode("0000000000000010 ;ext\r\n0123456789abcdef\r\n0\r\n\r\n");
    CHECK(d.done);
    CHECK(d.data == "0123456789abcdef");
    CHECK(decode("1F\r\n" + std::string(31, 'z') + "\r\n0\r\n\r\n").data.size() == 31);
    // not finished: no error, not done
    d = decode("5\r\nhel");
    CHECK((d.error == 0 && !d.done && d.data == "hel"));
    d = decode("5\r\nhello\r\n0\r\n");
    CHECK((d.error == 0 && !d.done));
}

TEST_CASE("malformed chunk framing is refused with 400") {
    for (const char* bad : {
             "x\r\n",                    // no digit
             "\r\n",                     // an empty size
             "0x5\r\nhello\r\n0\r\n\r\n", // a C prefix
             "-1\r\n",
             "+5\r\nhello\r\n",
             "5\nhello\r\n0\r\n\r\n",     // a bare LF after the size
             "5\r\rhello\r\n",
             "5 \r\nhello\r\n",           // blanks not followed by an extension
             "5\r\nhelloX\r\n",           // data longer than its size
             "5\r\nhello\n0\r\n\r\n",     // a bare LF after the data
             "5;a\x01\r\nhello\r\n",      // a control byte in an extension
             "0\r\nNoColon\r\n\r\n",      // a trailer that is not a field
             "0\r\n: v\r\n\r\n",           // an empty trailer name
             "0\r\n x: v\r\n\r\n",         // obs-fold
             "0\r\nA b: v\r\n\r\n",        // a space in a trailer name
             "0\r\nx: a\x7f\r\n\r\n",      // DEL in a trailer value
             "0\r\n\n",                   // a bare LF ending the body
         }) {
        CAPTURE(std::string(bad));
        CHECK(decode(bad).error == 400);
        CHECK(decode(bad, 1).error == 400);
    }
}

TEST_CASE("chunk sizes, extensions, trailers and framing overhead are bounded") {
    // 16 hex digits fit in 64 bits; a 17th digit is refused before it could overflow
    CHECK(decode("ffffffffffffffff\r\n", 1).error == 0);
    CHECK(decode("fffffffffffffffff\r\n", 1).error == 400);
    CHECK(decode("00000000000000001\r\nx\r\n0\r\n\r\n").error == 400); // padding counts too
    ChunkedDecoder d;
    const std::string big = "ffffffffffffffff\r\n";
    d.feed(big.data(), big.size());
    CHECK(d.promised() == ~0ull); // the caller sees the size before any data: 413 there
    // extensions: up to kMaxChunkExtBytes per size line
    CHECK(decode("1;" + std::string(kMaxChunkExtBytes, 'e') + "\r\nx\r\n0\r\n\r\n").done);
    CHECK(decode("1;" + std::string(kMaxChunkExtBytes + 1, 'e') + "\r\nx\r\n0\r\n\r\n").error == 400);
    // trailers: bytes and count
    std::string many = "0\r\n";
    for (unsigned i = 0; i < kMaxTrailers + 1; ++i) many += "t: v\r\n";
    CHECK(decode(many + "\r\n").error == 400);
    CHECK(decode("0\r\nt: " + std::string(kMaxTrailerBytes, 'v') + "\r\n\r\n").error == 400);
    // one-byte chunks with long extensions: the framing outgrows the data by the slack, refused
    std::string flood;
    const std::string one = "1;" + std::string(1000, 'e') + "\r\nx\r\n";
    while (flood.size() < kMaxFramingSlack + 4096) flood += one;
    CHECK(decode(flood).error == 400);
    // the same data in 1 KiB chunks with short extensions is fine at any length
    std::string fair;
    const std::string kib = "400;a=b\r\n" + std::string(1024, 'd') + "\r\n";
    while (fair.size() < 4 * kMaxFramingSlack) fair += kib;
    Decoded ok = decode(fair + "0\r\n\r\n", 4096);
    CHECK(ok.done);
    CHECK(ok.data.size() % 1024 == 0);
}

TEST_CASE("Transfer-Encoding in a head: chunked alone is framed, ambiguity is 400, other codings 501") {
    Request r;
    auto parse = [&](const std::string& te) {
        return parse_request("PUT /f HTTP/1.1\r\nHost: a\r\n" + te + "\r\n", r);
    };
    REQUIRE(parse("Transfer-Encoding: Chunked\r\n").result == ParseResult::complete);
    CHECK((r.chunked && r.has_body && !r.has_length));
    CHECK(parse("Transfer-Encoding: ,chunked,\r\n").result == ParseResult::complete); // empty list elements
    // both framings: 400, whichever comes first
    CHECK(parse("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n").status == 400);
    CHECK(parse("Transfer-Encoding: chunked\r\nContent-Length: 0\r\n").status == 400);
    // chunked twice or not last: 400
    CHECK(parse("Transfer-Encoding: chunked, chunked\r\n").status == 400);
    CHECK(parse("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n").status == 400);
    CHECK(parse("Transfer-Encoding: chunked, gzip\r\n").status == 400);
    CHECK(parse("Transfer-Encoding: \r\n").status == 400);
    // codings not implemented: 501
    CHECK(parse("Transfer-Encoding: gzip, chunked\r\n").status == 501);
    CHECK(parse("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n").status == 501);
    CHECK(parse("Transfer-Encoding: identity\r\n").status == 501);
    CHECK(parse("Transfer-Encoding: chunked;q=1\r\n").status == 501);
    // HTTP/1.0 has no transfer codings
    CHECK(parse_request("PUT /f HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", r).status == 400);
}

TEST_CASE("any input decodes the same whole and cut anywhere (a seeded sweep over framing bytes)") {
    const std::string alphabet = "0123456789abcdefAF;= \t\r\n:xz";
    uint64_t state = 0x9e3779b97f4a7c15ull; // fixed seed: the same inputs every run
    auto next = [&] {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        return state;
    };
    unsigned finished = 0, refused = 0;
    for (int n = 0; n < 20000; ++n) {
        std::string in;
        const size_t len = next() % 4 == 0 ? 0 : next() % 40;
        for (size_t i = 0; i < len; ++i) in += alphabet[next() % alphabet.size()];
        if (next() % 2) in = "3\r\nabc\r\n" + in; // often past a first chunk
        if (next() % 2) in += "0\r\n\r\nGET"; // and towards an end
        const Decoded whole = decode(in);
        for (size_t step : {size_t(1), size_t(5)}) {
            const Decoded cut = decode(in, step);
            REQUIRE(cut.data == whole.data);
            REQUIRE(cut.done == whole.done);
            REQUIRE(cut.error == whole.error);
        }
        finished += whole.done;
        refused += whole.error != 0;
    }
    CHECK(finished > 0); // the sweep reaches both ends, not only one
    CHECK(refused > 0);
}
