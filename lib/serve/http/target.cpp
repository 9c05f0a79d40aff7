#include "serve/http/target.hpp"

namespace sluice::http {

namespace {

int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

} // namespace

bool percent_decode(std::string_view in, std::string& out, bool plus_is_space) {
    out.clear();
    out.reserve(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
        char c = in[i];
        if (c == '%') {
            if (i + 2 >= in.size()) return false;
            int h = hex(in[i + 1]), l = hex(in[i + 2]);
            if (h < 0 || l < 0) return false;
            c = static_cast<char>(h * 16 + l);
            i += 2;
        } else if (c == '+' && plus_is_space) {
            c = ' ';
        }
        if (c == '\0') return false;
        out.push_back(c);
    }
    return true;
}

int parse_target(std::string_view raw, Target& out) {
    out.rel.clear();
    out.path.clear();
    out.query = {};
    out.trailing_slash = false;
    size_t q = raw.find('?');
    std::string_view path = raw.substr(0, q);
    if (q != std::string_view::npos) out.query = raw.substr(q + 1);
    size_t hash = path.find('#');
    if (hash != std::string_view::npos) path = path.substr(0, hash);
    if (path.empty() || path.front() != '/') return 400; // absolute-form and '*' are not served
    if (!percent_decode(path, out.path, false)) return 400;
    out.trailing_slash = out.path.back() == '/';
    // Segment by segment on the decoded path: "%2e%2e" is as much '..' as ".." is, and a
    // decoded '/' splits like a real one (there is no way to name a file with '/' in it).
    std::string_view rest = out.path;
    while (!rest.empty()) {
        size_t slash = rest.find('/');
        std::string_view seg = rest.substr(0, slash);
        rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
        if (seg.empty() || seg == ".") continue;
        if (seg == "..") return 400;
        if (!out.rel.empty()) out.rel.push_back('/');
        out.rel.append(seg);
    }
    return 0;
}

bool query_value(std::string_view query, std::string_view name, std::string& value) {
    while (!query.empty()) {
        size_t amp = query.find('&');
        std::string_view pair = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
        size_t eq = pair.find('=');
        if (pair.substr(0, eq) != name) continue;
        std::string_view v = eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1);
        return percent_decode(v, value, true);
    }
    return false;
}

std::string percent_encode_path(std::string_view in) {
    static const char digits[] = "0123456789ABCDEF";
    std::string out;
    out.reserve(in.size() * 3);
    for (unsigned char c : in) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
            c == '_' || c == '~' || c == '/') {
            out.push_back(static_cast<char>(c));
        } else {
            out.push_back('%');
            out.push_back(digits[c >> 4]);
            out.push_back(digits[c & 15]);
        }
    }
    return out;
}

} // namespace sluice::http
