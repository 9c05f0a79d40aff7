#pragma once
// One HTTP/1.1 request head, parsed in place: every field is a view into the connection's
// input (valid until that input is consumed). Network input is hostile: the head is bounded
// in bytes and header count, and anything malformed gets the status a client expects.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sluice::http {

inline constexpr size_t kMaxHeadBytes = 8192;   // request line + headers (nginx: 1 KiB + 4 x 8 KiB)
inline constexpr size_t kMaxTargetBytes = 4096; // longer: 414
inline constexpr unsigned kMaxHeaders = 64;     // more: 431

enum class Method : uint8_t { get, head, put, post, other_known, unknown };

struct Request {
    Method method = Method::unknown;
    std::string_view method_text;
    std::string_view target; // as sent: /path?query
    bool http11 = true;      // HTTP/1.1 (else 1.0)
    bool keep_alive = true;  // after Connection and the version
    bool has_host = false;
    bool has_body = false;   // Content-Length > 0 or Transfer-Encoding
    bool has_te = false;     // a Transfer-Encoding was given
    bool chunked = false;    // ... and it is "chunked" alone (http/chunked.hpp decodes the body)
    bool te_unknown = false; // ... naming a coding that is not implemented (501)
    bool has_length = false; // a Content-Length was given
    uint64_t content_length = 0;
    bool expect_continue = false; // Expect: 100-continue
    bool expect_other = false;    // any other Expect (417)
    std::string_view range, if_range, if_none_match, if_modified_since, authorization, accept;
    size_t head_bytes = 0; // bytes of the head, the blank line included
};

enum class ParseResult : uint8_t {
    complete,  // req is filled; head_bytes of input are its head
    need_more, // no blank line yet, within the limits
    error,     // status() says which
};

struct ParseOutcome {
    ParseResult result;
    int status = 0; // for error: 400, 414, 431, 501, 505
};

// Parses the head at the start of `in`. Tolerates a bare LF as line end (RFC 9112 2.2) and
// leading empty lines; refuses obs-fold, NUL and control bytes, and a space before a colon.
ParseOutcome parse_request(std::string_view in, Request& req);

// A token character (RFC 9110 5.6.2): method names, header and trailer field names.
bool is_tchar(unsigned char c);

// ASCII case-insensitive equality (header names, tokens).
bool iequals(std::string_view a, std::string_view b);

} // namespace sluice::http
