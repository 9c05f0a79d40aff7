#include <cctype>
#include <charconv>

#include "sluice/error.hpp"
#include "sluice/url.hpp"

namespace sluice {

namespace {

[[noreturn]] void bad_url(std::string_view url, const std::string& why) {
    throw Error(ErrorCode::usage, "invalid connection string '" + std::string(url) + "': " + why);
}

uint16_t parse_port(std::string_view text, std::string_view whole) {
    unsigned v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || p != text.data() + text.size() || v == 0 || v > 65535)
        bad_url(whole, "port '" + std::string(text) + "' is not a number from 1 to 65535");
    return static_cast<uint16_t>(v);
}

void split_host_port(std::string_view hp, std::string_view whole, Endpoint& e) {
    size_t colon;
    if (!hp.empty() && hp.front() == '[') {
        size_t close = hp.find(']');
        if (close == std::string_view::npos) bad_url(whole, "unclosed '[' in host");
        e.host = std::string(hp.substr(1, close - 1));
        colon = close + 1;
        if (colon >= hp.size() || hp[colon] != ':') bad_url(whole, "missing :PORT");
    } else {
        colon = hp.rfind(':');
        if (colon == std::string_view::npos) bad_url(whole, "missing :PORT");
        e.host = std::string(hp.substr(0, colon));
    }
    if (e.host.empty()) bad_url(whole, "missing host");
    e.port = parse_port(hp.substr(colon + 1), whole);
}

std::string percent_decode(std::string_view s, std::string_view whole) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%') {
            if (i + 2 >= s.size()) bad_url(whole, "truncated %-escape in token");
            unsigned v = 0;
            auto [p, ec] = std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16);
            if (ec != std::errc() || p != s.data() + i + 3) bad_url(whole, "bad %-escape in token");
            out.push_back(static_cast<char>(v));
            i += 2;
        } else {
            out.push_back(s[i]);
        }
    }
    return out;
}

std::string percent_encode(std::string_view s) {
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : s) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
            out.push_back(static_cast<char>(c));
        } else {
            out.push_back('%');
            out.push_back(hex[c >> 4]);
            out.push_back(hex[c & 15]);
        }
    }
    return out;
}

} // namespace

Endpoint parse_url(std::string_view url) {
    constexpr std::string_view scheme = "sluice://";
    if (url.substr(0, scheme.size()) != scheme) bad_url(url, "it must start with sluice://");
    std::string_view rest = url.substr(scheme.size());
    size_t end = rest.find_first_of("/?");
    Endpoint e;
    split_host_port(rest.substr(0, end), url, e);
    if (end == std::string_view::npos) return e;
    std::string_view tail = rest.substr(end);
    if (tail.front() == '/') tail.remove_prefix(1);
    if (tail.empty()) return e;
    if (tail.front() != '?') bad_url(url, "unexpected path after host:port");
    tail.remove_prefix(1);
    while (!tail.empty()) {
        size_t amp = tail.find('&');
        std::string_view kv = tail.substr(0, amp);
        size_t eq = kv.find('=');
        std::string_view key = kv.substr(0, eq);
        if (key == "token" && eq != std::string_view::npos)
            e.token = percent_decode(kv.substr(eq + 1), url);
        else
            bad_url(url, "unknown parameter '" + std::string(key) + "'");
        if (amp == std::string_view::npos) break;
        tail.remove_prefix(amp + 1);
    }
    return e;
}

Endpoint parse_host_port(std::string_view host_port) {
    Endpoint e;
    split_host_port(host_port, host_port, e);
    return e;
}

std::string format_url(const Endpoint& e) {
    std::string host = e.host.find(':') != std::string::npos ? "[" + e.host + "]" : e.host;
    std::string url = "sluice://" + host + ":" + std::to_string(e.port) + "/";
    if (!e.token.empty()) url += "?token=" + percent_encode(e.token);
    return url;
}

uint64_t parse_size(std::string_view text, const char* option) {
    auto fail = [&] {
        throw Error(ErrorCode::usage,
                    std::string(option) + ": '" + std::string(text) + "' is not a size (examples: 65536, 512K, 8M, 1G)");
    };
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || p == text.data()) fail();
    std::string_view unit(p, text.data() + text.size() - p);
    if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.remove_suffix(1);
    if (unit.size() == 2 && (unit[1] == 'i' || unit[1] == 'I')) unit.remove_suffix(1);
    int shift = 0;
    if (unit.empty())
        shift = 0;
    else if (unit.size() == 1) {
        switch (std::toupper(static_cast<unsigned char>(unit[0]))) {
        case 'K': shift = 10; break;
        case 'M': shift = 20; break;
        case 'G': shift = 30; break;
        case 'T': shift = 40; break;
        default: fail();
        }
    } else {
        fail();
    }
    if (shift && v > (UINT64_MAX >> shift)) fail();
    return v << shift;
}

} // namespace sluice
