#include "serve/http/response.hpp"

#include <cstdio>
#include <cstring>

#include "serve/http/request.hpp"

namespace sluice::http {

const char* reason(int status) {
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 416: return "Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    case 507: return "Insufficient Storage";
    default: return "Unknown";
    }
}

void format_date(time_t t, char out[32]) {
    struct tm tm {};
    gmtime_r(&t, &tm);
    std::strftime(out, 32, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

time_t parse_date(std::string_view s) {
    if (s.size() != 29) return -1;
    char buf[30];
    std::memcpy(buf, s.data(), 29);
    buf[29] = 0;
    struct tm tm {};
    const char* end = strptime(buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    if (!end || *end) return -1;
    return timegm(&tm);
}

void format_etag(uint64_t ino, uint64_t size, int64_t mtime_ns, char out[64]) {
    std::snprintf(out, 64, "\"%llx-%llx-%llx\"", static_cast<unsigned long long>(ino),
                  static_cast<unsigned long long>(size), static_cast<unsigned long long>(mtime_ns));
}

bool etag_list_matches(std::string_view list, std::string_view etag) {
    auto strip = [](std::string_view v) {
        while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
        while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
        if (v.substr(0, 2) == "W/") v.remove_prefix(2);
        return v;
    };
    if (strip(list) == "*") return true;
    while (!list.empty()) {
        size_t comma = list.find(',');
        if (strip(list.substr(0, comma)) == etag) return true;
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
    }
    return false;
}

namespace {

bool parse_u64(std::string_view s, uint64_t& v) {
    if (s.empty() || s.size() > 19) return false;
    v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    return true;
}

} // namespace

RangeResult parse_range(std::string_view value, uint64_t size, ByteRange& out) {
    if (value.substr(0, 6) != "bytes=") return RangeResult::none;
    value.remove_prefix(6);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
    if (value.find(',') != std::string_view::npos) return RangeResult::none; // several: the whole file
    size_t dash = value.find('-');
    if (dash == std::string_view::npos) return RangeResult::none;
    std::string_view a = value.substr(0, dash), b = value.substr(dash + 1);
    uint64_t first = 0, last = 0;
    if (a.empty()) { // suffix: the last b bytes
        if (!parse_u64(b, last)) return RangeResult::none;
        if (last == 0 || size == 0) return RangeResult::unsatisfiable;
        out.first = last >= size ? 0 : size - last;
        out.last = size - 1;
        return RangeResult::ok;
    }
    if (!parse_u64(a, first)) return RangeResult::none;
    if (b.empty()) {
        last = size ? size - 1 : 0;
    } else {
        if (!parse_u64(b, last) || last < first) return RangeResult::none;
    }
    if (first >= size) return RangeResult::unsatisfiable;
    out.first = first;
    out.last = last >= size ? size - 1 : last;
    return RangeResult::ok;
}

size_t write_head(const Head& h, char* buf, size_t cap) {
    size_t n = 0;
    bool ok = true;
    auto put = [&](const char* fmt, auto... args) {
        if (!ok) return;
        int k = std::snprintf(buf + n, cap - n, fmt, args...);
        if (k < 0 || static_cast<size_t>(k) >= cap - n) ok = false;
        else n += static_cast<size_t>(k);
    };
    auto sv = [](std::string_view v) { return static_cast<int>(v.size()); };
    put("HTTP/1.1 %d %s\r\nServer: sluice\r\nDate: %.*s\r\n", h.status, reason(h.status), sv(h.date), h.date.data());
    if (h.status != 304) put("Content-Length: %llu\r\n", static_cast<unsigned long long>(h.content_length));
    if (!h.content_type.empty()) put("Content-Type: %.*s\r\n", sv(h.content_type), h.content_type.data());
    if (!h.etag.empty()) put("ETag: %.*s\r\n", sv(h.etag), h.etag.data());
    if (!h.last_modified.empty()) put("Last-Modified: %.*s\r\n", sv(h.last_modified), h.last_modified.data());
    if (h.accept_ranges) put("Accept-Ranges: bytes\r\n");
    if (h.range)
        put("Content-Range: bytes %llu-%llu/%llu\r\n", static_cast<unsigned long long>(h.range->first),
            static_cast<unsigned long long>(h.range->last), static_cast<unsigned long long>(h.full_size));
    if (h.status == 416) put("Content-Range: bytes */%llu\r\n", static_cast<unsigned long long>(h.full_size));
    if (!h.location.empty()) put("Location: %.*s\r\n", sv(h.location), h.location.data());
    if (h.www_authenticate) put("WWW-Authenticate: Bearer realm=\"sluice\"\r\n");
    if (!h.allow.empty()) put("Allow: %.*s\r\n", sv(h.allow), h.allow.data());
    put("Connection: %s\r\n\r\n", h.keep_alive ? "keep-alive" : "close");
    return ok ? n : 0;
}

std::string_view content_type_for(std::string_view name) {
    size_t dot = name.rfind('.');
    if (dot == std::string_view::npos) return "application/octet-stream";
    std::string_view ext = name.substr(dot + 1);
    struct Entry {
        const char* ext;
        const char* type;
    };
    static const Entry table[] = {
        {"html", "text/html; charset=utf-8"}, {"htm", "text/html; charset=utf-8"}, {"txt", "text/plain; charset=utf-8"},
        {"css", "text/css"}, {"js", "text/javascript"}, {"json", "application/json"}, {"csv", "text/csv"},
        {"png", "image/png"}, {"jpg", "image/jpeg"}, {"jpeg", "image/jpeg"}, {"gif", "image/gif"},
        {"svg", "image/svg+xml"}, {"pdf", "application/pdf"}, {"gz", "application/gzip"}, {"zip", "application/zip"},
        {"tar", "application/x-tar"}, {"parquet", "application/vnd.apache.parquet"}, {"wasm", "application/wasm"},
    };
    for (const Entry& e : table)
        if (iequals(ext, e.ext)) return e.type;
    return "application/octet-stream";
}

} // namespace sluice::http
