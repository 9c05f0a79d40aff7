// printable(): what a terminal may be shown of text from a peer or the file system.
#include <doctest/doctest.h>

#include <string>

#include "core/session/session_log.hpp"
#include "core/wire/codec.hpp"
#include "sluice/error.hpp"
#include "sluice/printable.hpp"

using namespace sluice;

namespace {

struct Case {
    const char* what;
    std::string in;
    std::string out;
};

bool has_terminal_bytes(const std::string& s) {
    for (unsigned char c : s)
        if (c < 0x20 || c == 0x7f) return true;
    return false;
}

} // namespace

TEST_CASE("printable escapes what acts on a terminal and keeps printable UTF-8") {
    const Case cases[] = {
        {"plain ASCII", "dir/file name.txt", "dir/file name.txt"},
        {"valid UTF-8", "café/日本/naïve — 🎉", "café/日本/naïve — 🎉"},
        {"clear screen", "\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"},
        {"OSC window title, BEL-terminated", "\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"},
        {"OSC title, ST-terminated", "\x1b]2;t\x1b\\", "\\x1b]2;t\\x1b\\"},
        {"carriage return overwriting the line", "ok\rFAKE", "ok\\x0dFAKE"},
        {"newline, tab, NUL, DEL", std::string("a\nb\tc\0d\x7f", 8), "a\\x0ab\\x09c\\x00d\\x7f"},
        {"backspace", "abc\b\b\bxyz", "abc\\x08\\x08\\x08xyz"},
        {"C1 CSI as UTF-8 (U+009B)",
         "\xc2\x9b"
         "2J",
         "\\u009b2J"},
        {"C1 NEL (U+0085)",
         "a\xc2\x85"
         "b",
         "a\\u0085b"},
        {"bidi right-to-left override U+202E", "invoice\xe2\x80\xaetxt.exe", "invoice\\u202etxt.exe"},
        {"bidi isolates U+2066..U+2069", "\xe2\x81\xa6x\xe2\x81\xa9", "\\u2066x\\u2069"},
        {"LRM, RLM, ALM", "\xe2\x80\x8e\xe2\x80\x8f\xd8\x9c", "\\u200e\\u200f\\u061c"},
        {"line separator U+2028",
         "a\xe2\x80\xa8"
         "b",
         "a\\u2028b"},
        {"lone continuation byte", "a\x80z", "a\\x80z"},
        {"raw C1 byte (Latin-1 CSI)",
         "\x9b"
         "2J",
         "\\x9b2J"},
        {"overlong slash", "\xc0\xaf", "\\xc0\\xaf"},
        {"overlong 3-byte", "\xe0\x80\xaf", "\\xe0\\x80\\xaf"},
        {"UTF-16 surrogate", "\xed\xa0\x80", "\\xed\\xa0\\x80"},
        {"past U+10FFFF", "\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"},
        {"truncated sequence at the end", "ab\xe6\x97", "ab\\xe6\\x97"},
        {"truncated sequence before ASCII", "\xe6\x97x", "\\xe6\\x97x"},
        {"Latin-1 é (invalid as UTF-8)", "caf\xe9", "caf\\xe9"},
        {"backslash kept", "a\\b", "a\\b"},
        {"empty", "", ""},
    };
    for (const auto& c : cases) {
        CAPTURE(c.what);
        CHECK(printable(c.in) == c.out);
        CHECK(!has_terminal_bytes(printable(c.in)));
        CHECK(printable(printable(c.in)) == printable(c.in)); // idempotent: both sides may escape
    }
}

TEST_CASE("every byte value alone comes out printable") {
    for (int b = 0; b < 256; ++b) {
        std::string s(1, static_cast<char>(b));
        std::string p = printable(s);
        CAPTURE(b);
        CHECK(!has_terminal_bytes(p));
        if (b >= 0x80) CHECK(p.size() == 4); // no lone byte >= 0x80 is valid UTF-8
    }
}

TEST_CASE("an Error's message and a log line are escaped where they are made") {
    Error e(ErrorCode::protocol, "manifest lists '\x1b]0;x\x07' twice");
    CHECK(std::string(e.what()) == "manifest lists '\\x1b]0;x\\x07' twice");

    std::string got;
    SessionLog log([&](std::string_view line) { got = line; }, false);
    log.line("warning: checksum mismatch in 'a\rb'");
    CHECK(got == "warning: checksum mismatch in 'a\\x0db'");
}

TEST_CASE("a peer's ABORT and FINAL_STATUS messages are escaped as they are decoded") {
    wire::Bytes out;
    wire::encode_abort(out, wire::Abort{.code = 1, .message = "\x1b[2Jgone\r"});
    auto a = wire::decode_abort(wire::Span(out).subspan(wire::kFrameHeaderBytes));
    CHECK(a.message == "\\x1b[2Jgone\\x0d");

    out.clear();
    wire::encode_final_status(out, {3, 0, 0, 0, "bad \xe2\x80\xae name"});
    auto s = wire::decode_final_status(wire::Span(out).subspan(wire::kFrameHeaderBytes));
    CHECK(s.message == "bad \\u202e name");
}
