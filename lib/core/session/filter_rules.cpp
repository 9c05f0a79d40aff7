#include "core/session/filter_rules.hpp"

#include <fstream>

#include "sluice/error.hpp"

namespace sluice {

namespace {

// One '[...]' class at p (p[0] == '['); returns whether c is in it and sets `end` past ']'.
// A class with no closing ']' is a literal '['.
bool class_match(std::string_view p, char c, size_t& end) {
    size_t i = 1;
    bool negate = false;
    if (i < p.size() && (p[i] == '!' || p[i] == '^')) negate = true, ++i;
    bool hit = false;
    const size_t first = i;
    for (; i < p.size() && (p[i] != ']' || i == first); ++i) {
        char lo = p[i];
        if (lo == '\\' && i + 1 < p.size()) lo = p[++i];
        char hi = lo;
        if (i + 2 < p.size() && p[i + 1] == '-' && p[i + 2] != ']') {
            hi = p[i + 2];
            i += 2;
        }
        if (static_cast<unsigned char>(c) >= static_cast<unsigned char>(lo) &&
            static_cast<unsigned char>(c) <= static_cast<unsigned char>(hi))
            hit = true;
    }
    if (i >= p.size()) {
        end = 0; // unterminated: not a class
        return c == '[';
    }
    end = i + 1;
    return hit != negate && c != '/';
}

} // namespace

bool glob_match(std::string_view p, std::string_view t) {
    // Recursive on stars: patterns are the user's own (never from the network) and short.
    size_t pi = 0, ti = 0;
    while (pi < p.size()) {
        if (p[pi] == '*') {
            const bool any = pi + 1 < p.size() && p[pi + 1] == '*';
            while (pi < p.size() && p[pi] == '*') ++pi;
            const std::string_view rest = p.substr(pi);
            for (size_t k = ti;; ++k) {
                if (glob_match(rest, t.substr(k))) return true;
                if (k == t.size() || (!any && t[k] == '/')) return false;
            }
        }
        if (ti == t.size()) return false;
        size_t next = pi + 1;
        bool ok = false;
        if (p[pi] == '?') {
            ok = t[ti] != '/';
        } else if (p[pi] == '[') {
            size_t end = 0;
            ok = class_match(p.substr(pi), t[ti], end);
            if (end) next = pi + end;
        } else if (p[pi] == '\\' && pi + 1 < p.size()) {
            ok = p[pi + 1] == t[ti];
            next = pi + 2;
        } else {
            ok = p[pi] == t[ti];
        }
        if (!ok) return false;
        pi = next;
        ++ti;
    }
    return ti == t.size();
}

std::vector<std::string> FilterRules::texts() const {
    std::vector<std::string> out;
    for (const Rule& r : rules_) out.push_back(std::string(r.include ? "+ " : "- ") + r.text);
    return out;
}

void FilterRules::add(bool include, std::string pattern) {
    Rule r{include, false, false, false, {}, pattern};
    if (!pattern.empty() && pattern.front() == '/') {
        r.anchored = true;
        pattern.erase(0, 1);
    }
    while (pattern.size() > 1 && pattern.back() == '/') {
        r.dir_only = true;
        pattern.pop_back();
    }
    if (pattern.empty() || pattern == "/") throw Error(ErrorCode::usage, "empty filter pattern");
    r.whole_path = r.anchored || pattern.find('/') != std::string::npos || pattern.find("**") != std::string::npos;
    r.glob = std::move(pattern);
    rules_.push_back(std::move(r));
}

void FilterRules::add_rule(std::string_view rule) {
    if (rule.size() > 2 && rule[0] == '.' && rule[1] == ' ') { // rsync's merge rule: rules read from a file
        add_from_file(std::string(rule.substr(2)));
        return;
    }
    if (rule.size() > 2 && (rule[0] == '+' || rule[0] == '-') && rule[1] == ' ') {
        add(rule[0] == '+', std::string(rule.substr(2)));
        return;
    }
    throw Error(ErrorCode::usage, "filter rule '" + std::string(rule) + "' is not '+ PATTERN', '- PATTERN' or '. FILE'");
}

void FilterRules::add_from_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw Error(ErrorCode::usage, "cannot read filter file '" + path + "'");
    std::string line;
    for (unsigned n = 1; std::getline(in, line); ++n) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty() || line[0] == '#' || line[0] == ';') continue;
        try {
            if (line.size() > 2 && (line[0] == '+' || line[0] == '-') && line[1] == ' ')
                add_rule(line);
            else
                add(false, line);
        } catch (const Error& e) {
            throw Error(ErrorCode::usage, "filter file '" + path + "' line " + std::to_string(n) + ": " + e.what());
        }
    }
}

bool FilterRules::excluded(std::string_view rel, bool is_dir) const {
    const size_t slash = rel.rfind('/');
    const std::string_view last = slash == std::string_view::npos ? rel : rel.substr(slash + 1);
    for (const Rule& r : rules_) {
        if (r.dir_only && !is_dir) continue;
        bool hit = false;
        if (!r.whole_path) {
            hit = glob_match(r.glob, last);
        } else if (r.anchored) {
            hit = glob_match(r.glob, rel);
        } else {
            // Unanchored with a '/': matches the path from any component on.
            for (size_t at = 0;;) {
                if ((hit = glob_match(r.glob, rel.substr(at)))) break;
                const size_t next = rel.find('/', at);
                if (next == std::string_view::npos) break;
                at = next + 1;
            }
        }
        if (hit) return !r.include;
    }
    return false;
}

} // namespace sluice
