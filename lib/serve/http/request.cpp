#include "serve/http/request.hpp"

#include <charconv>

namespace sluice::http {

bool is_tchar(unsigned char c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
    switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+': case '-': case '.':
    case '^': case '_': case '`': case '|': case '~': return true;
    default: return false;
    }
}

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
        unsigned char x = static_cast<unsigned char>(a[i]), y = static_cast<unsigned char>(b[i]);
        if (x >= 'A' && x <= 'Z') x = static_cast<unsigned char>(x + 32);
        if (y >= 'A' && y <= 'Z') y = static_cast<unsigned char>(y + 32);
        if (x != y) return false;
    }
    return true;
}

namespace {

std::string_view trim(std::string_view v) {
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    return v;
}

// Whether a comma-separated header value holds `token` (Connection: keep-alive, Upgrade).
bool has_token(std::string_view list, std::string_view token) {
    while (!list.empty()) {
        size_t comma = list.find(',');
        if (iequals(trim(list.substr(0, comma)), token)) return true;
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
    }
    return false;
}

Method method_of(std::string_view m) {
    if (m == "GET") return Method::get;
    if (m == "HEAD") return Method::head;
    if (m == "PUT") return Method::put;
    if (m == "POST") return Method::post;
    for (std::string_view k : {"DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT"})
        if (m == k) return Method::other_known;
    return Method::unknown;
}

// The line starting at pos, without its CR LF (or bare LF); npos when no LF is there yet.
size_t line_end(std::string_view in, size_t pos, size_t& next) {
    size_t lf = in.find('\n', pos);
    if (lf == std::string_view::npos) return lf;
    next = lf + 1;
    return (lf > pos && in[lf - 1] == '\r') ? lf - 1 : lf;
}

ParseOutcome bad(int status) { return {ParseResult::error, status}; }

} // namespace

ParseOutcome parse_request(std::string_view in, Request& req) {
    req = Request{};
    size_t pos = 0;
    // RFC 9112 2.2: a server SHOULD ignore at least one empty line before the request line.
    while (pos < in.size() && pos < 4 && (in[pos] == '\r' || in[pos] == '\n')) ++pos;
    size_t next = 0;
    size_t end = line_end(in, pos, next);
    if (end == std::string_view::npos) {
        if (in.size() - pos > kMaxTargetBytes + 32) return bad(414); // a request line this long is all target
        return {ParseResult::need_more};
    }
    std::string_view line = in.substr(pos, end - pos);
    size_t sp1 = line.find(' ');
    size_t sp2 = line.rfind(' ');
    if (sp1 == std::string_view::npos || sp2 == sp1) return bad(400);
    req.method_text = line.substr(0, sp1);
    req.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    std::string_view version = line.substr(sp2 + 1);
    if (req.method_text.empty()) return bad(400);
    for (unsigned char c : req.method_text)
        if (!is_tchar(c)) return bad(400);
    if (req.target.size() > kMaxTargetBytes) return bad(414);
    if (req.target.empty()) return bad(400);
    for (unsigned char c : req.target)
        if (c <= 0x20 || c == 0x7f) return bad(400); // a space inside, NUL, controls
    if (version == "HTTP/1.1") {
        req.http11 = true;
    } else if (version == "HTTP/1.0") {
        req.http11 = false;
        req.keep_alive = false;
    } else if (version.size() == 8 && version.substr(0, 5) == "HTTP/" && version[6] == '.') {
        return bad(505);
    } else {
        return bad(400);
    }
    req.method = method_of(req.method_text);

    unsigned count = 0;
    pos = next;
    for (;;) {
        end = line_end(in, pos, next);
        if (end == std::string_view::npos) {
            if (in.size() > kMaxHeadBytes) return bad(431);
            return {ParseResult::need_more};
        }
        if (next > kMaxHeadBytes) return bad(431);
        if (end == pos) break; // the blank line
        if (++count > kMaxHeaders) return bad(431);
        std::string_view h = in.substr(pos, end - pos);
        pos = next;
        if (h.front() == ' ' || h.front() == '\t') return bad(400); // obs-fold
        size_t colon = h.find(':');
        if (colon == std::string_view::npos || colon == 0) return bad(400);
        std::string_view name = h.substr(0, colon);
        for (unsigned char c : name)
            if (!is_tchar(c)) return bad(400); // also a space before the colon (RFC 9112 5.1)
        std::string_view value = trim(h.substr(colon + 1));
        for (unsigned char c : value)
            if ((c < 0x20 && c != '\t') || c == 0x7f) return bad(400);
        if (iequals(name, "host")) {
            if (req.has_host) return bad(400); // two Hosts: RFC 9112 3.2
            req.has_host = true;
        } else if (iequals(name, "connection")) {
            if (has_token(value, "close")) req.keep_alive = false;
            else if (has_token(value, "keep-alive")) req.keep_alive = true;
        } else if (iequals(name, "content-length")) {
            uint64_t n = 0;
            auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
            if (ec != std::errc() || p != value.data() + value.size() || value.empty()) return bad(400);
            // Two different lengths: which one frames the body is ambiguous (smuggling).
            if (req.has_length && n != req.content_length) return bad(400);
            req.has_length = true;
            req.content_length = n;
            if (n > 0) req.has_body = true;
        } else if (iequals(name, "transfer-encoding")) {
            // Several lines form one list. Only "chunked" is decoded, once and last (RFC 9112
            // 6.1, 6.3): chunked twice or not last frames the body ambiguously (400); any other
            // coding is one this server does not implement (501, after the checks below).
            req.has_te = req.has_body = true;
            for (std::string_view list = value; !list.empty();) {
                const size_t comma = list.find(',');
                const std::string_view coding = trim(list.substr(0, comma));
                list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
                if (coding.empty()) continue;
                if (req.chunked) return bad(400); // something after chunked, or chunked twice
                if (iequals(coding, "chunked"))
                    req.chunked = true;
                else
                    req.te_unknown = true;
            }
        } else if (iequals(name, "expect")) {
            if (iequals(value, "100-continue"))
                req.expect_continue = true;
            else
                req.expect_other = true;
        } else if (iequals(name, "range")) {
            req.range = value;
        } else if (iequals(name, "if-range")) {
            req.if_range = value;
        } else if (iequals(name, "if-none-match")) {
            req.if_none_match = value;
        } else if (iequals(name, "if-modified-since")) {
            req.if_modified_since = value;
        } else if (iequals(name, "authorization")) {
            req.authorization = value;
        } else if (iequals(name, "accept")) {
            req.accept = value;
        }
    }
    req.head_bytes = next;
    if (req.http11 && !req.has_host) return bad(400);
    if (req.has_te) {
        // Both framings at once is how requests are smuggled past a proxy (RFC 9112 6.3: the
        // message is then to be treated as an error); HTTP/1.0 has no transfer codings (6.1).
        if (req.has_length || !req.http11) return bad(400);
        if (req.te_unknown) return bad(501);
        if (!req.chunked) return bad(400); // a Transfer-Encoding with no coding in it
    }
    return {ParseResult::complete};
}

} // namespace sluice::http
