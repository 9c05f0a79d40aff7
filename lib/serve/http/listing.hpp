#pragma once
// A directory listing: HTML for a browser (names escaped, links percent-encoded, so a file
// called "<script>" is shown as text and still opens), JSON for scripts.
#include <string>
#include <string_view>

namespace sluice::http {

inline constexpr size_t kMaxListingEntries = 50000; // more: the listing says it is truncated

enum class ListingFormat { html, json };

// Lists the directory open as dir_fd (borrowed). `path` is the decoded request path ending in
// '/', `link_query` what each link carries after '?' (the token a browser came with; empty:
// nothing). Returns false (errno set) when the directory cannot be read.
bool make_listing(int dir_fd, std::string_view path, std::string_view link_query, ListingFormat format, std::string& out);

// HTML text and attribute escaping (& < > " ').
void append_html_escaped(std::string& out, std::string_view s);
// A JSON string with its quotes; bytes that are not UTF-8 become U+FFFD.
void append_json_string(std::string& out, std::string_view s);

} // namespace sluice::http
