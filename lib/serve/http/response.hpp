#pragma once
// What a response says about a file: validators (ETag, Last-Modified), conditional requests
// (RFC 9110 13), a single byte range (RFC 9110 14), and the head written into a fixed buffer.
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <string_view>

namespace sluice::http {

const char* reason(int status);

// "Tue, 24 Nov 2026 06:12:21 GMT" into out (30 bytes incl. NUL).
void format_date(time_t t, char out[32]);
// -1 when not an IMF-fixdate.
time_t parse_date(std::string_view s);

// A strong validator from the inode, size and mtime: changes whenever the file is replaced
// or written (sluice's receiver renames into place, so a new version has a new inode).
void format_etag(uint64_t ino, uint64_t size, int64_t mtime_ns, char out[64]);

// Whether If-None-Match's list matches etag (weak comparison, as RFC 9110 13.1.2 says).
bool etag_list_matches(std::string_view list, std::string_view etag);

struct ByteRange {
    uint64_t first = 0, last = 0; // inclusive
};
enum class RangeResult : uint8_t { none, ok, unsatisfiable };
// One "bytes=" range against a file of `size` bytes. Several ranges, other units or a
// malformed value: none (the whole file is sent, as RFC 9110 14.2 allows).
RangeResult parse_range(std::string_view value, uint64_t size, ByteRange& out);

// Writes a response head into buf (cap bytes); returns its length, 0 if it does not fit.
struct Head {
    int status = 200;
    uint64_t content_length = 0;
    std::string_view content_type;
    std::string_view etag;          // empty: none
    std::string_view last_modified; // empty: none
    std::string_view date;
    std::string_view location;      // 301
    const ByteRange* range = nullptr; // 206: Content-Range
    uint64_t full_size = 0;           // 206 and 416
    bool accept_ranges = false;
    bool keep_alive = true;
    bool www_authenticate = false;
    std::string_view allow;           // 405: the methods served
};
size_t write_head(const Head& h, char* buf, size_t cap);

// Content type by file name extension (a short table; application/octet-stream otherwise).
std::string_view content_type_for(std::string_view name);

} // namespace sluice::http
