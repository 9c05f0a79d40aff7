#pragma once
// The request target, turned into a path relative to DIR. Refused here, before any file
// system call: a target not starting with '/', bad or NUL percent-escapes, '..' segments,
// and names that are not plain relative paths. Symlinks out of DIR are refused later, by the
// kernel (openat2 RESOLVE_BENEATH, serve/engine/doc_root.cpp).
#include <string>
#include <string_view>

namespace sluice::http {

struct Target {
    std::string rel;        // "a/b/c" ("" for DIR itself): no leading or trailing '/', no '.', '..', "//"
    bool trailing_slash = false;
    std::string path;       // the decoded path as sent, for messages and listings ("/a/b/")
    std::string_view query; // after '?', undecoded
};

// 0 on success, else the status to answer (400).
int parse_target(std::string_view raw, Target& out);

// The decoded value of `name` in a query string (a=1&b=2), or nullopt-like: found = false.
bool query_value(std::string_view query, std::string_view name, std::string& value);

// Percent-decodes; false on a malformed escape or a NUL byte.
bool percent_decode(std::string_view in, std::string& out, bool plus_is_space);

// Percent-encodes everything but unreserved characters and '/' (for href attributes).
std::string percent_encode_path(std::string_view in);

} // namespace sluice::http
