#include "serve/http/listing.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <vector>

#include "serve/http/target.hpp"

namespace sluice::http {

void append_html_escaped(std::string& out, std::string_view s) {
    for (char c : s) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&#39;"; break;
        default: out.push_back(c);
        }
    }
}

namespace {

// Length of the valid UTF-8 sequence at s[i], 0 if there is none.
size_t utf8_len(std::string_view s, size_t i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return 0;
    for (size_t k = 1; k < n; ++k)
        if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return 0;
    if (n == 2 && c < 0xc2) return 0; // overlong
    return n;
}

struct Entry {
    std::string name;
    char type; // 'f' file, 'd' directory, 'l' symlink, 'o' other
    uint64_t size;
    int64_t mtime;
};

const char* type_name(char t) {
    switch (t) {
    case 'f': return "file";
    case 'd': return "dir";
    case 'l': return "link";
    default: return "other";
    }
}

} // namespace

void append_json_string(std::string& out, std::string_view s) {
    out.push_back('"');
    for (size_t i = 0; i < s.size();) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (c == '"' || c == '\\') {
            out.push_back('\\');
            out.push_back(static_cast<char>(c));
            ++i;
        } else if (c < 0x20) {
            char esc[8];
            std::snprintf(esc, sizeof esc, "\\u%04x", c);
            out += esc;
            ++i;
        } else if (size_t n = utf8_len(s, i)) {
            out.append(s.substr(i, n));
            i += n;
        } else {
            out += "\xef\xbf\xbd"; // U+FFFD
            ++i;
        }
    }
    out.push_back('"');
}

bool make_listing(int dir_fd, std::string_view path, std::string_view link_query, ListingFormat format, std::string& out) {
    int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return false;
    DIR* d = ::fdopendir(fd);
    if (!d) {
        ::close(fd);
        return false;
    }
    std::vector<Entry> entries;
    bool truncated = false;
    while (dirent* e = ::readdir(d)) {
        std::string_view name = e->d_name;
        if (name == "." || name == "..") continue;
        if (entries.size() >= kMaxListingEntries) {
            truncated = true;
            break;
        }
        struct stat st {};
        if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue; // gone meanwhile
        char t = S_ISREG(st.st_mode) ? 'f' : S_ISDIR(st.st_mode) ? 'd' : S_ISLNK(st.st_mode) ? 'l' : 'o';
        entries.push_back({std::string(name), t, static_cast<uint64_t>(st.st_size), static_cast<int64_t>(st.st_mtime)});
    }
    ::closedir(d);
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });

    out.clear();
    if (format == ListingFormat::json) {
        out += "{\"path\":";
        append_json_string(out, path);
        out += ",\"truncated\":";
        out += truncated ? "true" : "false";
        out += ",\"entries\":[";
        for (size_t i = 0; i < entries.size(); ++i) {
            const Entry& e = entries[i];
            if (i) out.push_back(',');
            out += "{\"name\":";
            append_json_string(out, e.name);
            out += ",\"type\":\"";
            out += type_name(e.type);
            out += "\",\"size\":" + std::to_string(e.size) + ",\"mtime\":" + std::to_string(e.mtime) + "}";
        }
        out += "]}\n";
        return true;
    }
    const std::string q = link_query.empty() ? std::string() : "?" + std::string(link_query);
    out += "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of ";
    append_html_escaped(out, path);
    out += "</title></head>\n<body><h1>Index of ";
    append_html_escaped(out, path);
    out += "</h1>\n<table>\n<tr><th>Name</th><th>Size</th></tr>\n";
    if (path != "/") {
        out += "<tr><td><a href=\"../";
        append_html_escaped(out, q);
        out += "\">../</a></td><td></td></tr>\n";
    }
    for (const Entry& e : entries) {
        // Relative links: the page's URL ends in '/', so "./name" resolves beneath it; the
        // "./" keeps a name with a ':' from being read as a scheme.
        std::string href = "./" + percent_encode_path(e.name);
        if (e.type == 'd') href.push_back('/');
        href += q;
        out += "<tr><td><a href=\"";
        append_html_escaped(out, href);
        out += "\">";
        append_html_escaped(out, e.name);
        if (e.type == 'd') out.push_back('/');
        out += "</a></td><td>";
        if (e.type == 'f') out += std::to_string(e.size);
        out += "</td></tr>\n";
    }
    out += "</table>\n";
    if (truncated) out += "<p>Truncated: only the first " + std::to_string(kMaxListingEntries) + " entries are listed.</p>\n";
    out += "</body></html>\n";
    return true;
}

} // namespace sluice::http
