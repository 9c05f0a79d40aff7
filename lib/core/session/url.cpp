#include <algorithm>
#include <cctype>
#include <charconv>

#include "sluice/error.hpp"
#include "sluice/url.hpp"

namespace sluice {

namespace {

// The URL as an error message may show it: the token's value is left out, so that a mistyped
// URL does not put the secret into a terminal log (Error escapes the rest).
std::string redacted(std::string_view url) {
    std::string out(url);
    for (size_t at = out.find("token="); at != std::string::npos; at = out.find("token=", at + 1)) {
        size_t v = at + 6, e = out.find_first_of("&#", v);
        if (e == std::string::npos) e = out.size();
        if (e > v) out.replace(v, e - v, "...");
    }
    return out;
}

[[noreturn]] void bad_url(std::string_view url, const std::string& why) {
    throw Error(ErrorCode::usage, "invalid connection string '" + redacted(url) + "': " + why);
}

uint16_t parse_port(std::string_view text, std::string_view whole) {
    if (text.empty()) bad_url(whole, "missing port after ':'");
    unsigned v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || p != text.data() + text.size() || v == 0 || v > 65535)
        bad_url(whole, "port '" + std::string(text) + "' is not a number from 1 to 65535");
    return static_cast<uint16_t>(v);
}

bool host_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_'; }

// [IPv6] with an optional zone (fe80::1%25eth0, RFC 6874; a bare % is taken too), as
// getaddrinfo takes it.
std::string ipv6_literal(std::string_view inside, std::string_view whole) {
    std::string_view addr = inside, zone;
    if (size_t pct = inside.find('%'); pct != std::string_view::npos) {
        addr = inside.substr(0, pct);
        zone = inside.substr(pct + 1);
        if (zone.substr(0, 2) == "25") zone.remove_prefix(2);
        if (zone.empty() || !std::all_of(zone.begin(), zone.end(), host_name_char))
            bad_url(whole, "bad zone in the IPv6 address [" + std::string(inside) + "]");
    }
    if (addr.find(':') == std::string_view::npos || !std::all_of(addr.begin(), addr.end(), [](char c) {
            return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
        }))
        bad_url(whole, "'[" + std::string(inside) + "]' is not an IPv6 address");
    return zone.empty() ? std::string(addr) : std::string(addr) + "%" + std::string(zone);
}

void split_host_port(std::string_view hp, std::string_view whole, Endpoint& e) {
    if (hp.find('@') != std::string_view::npos)
        bad_url(whole, "user info ('...@' before the host) is not supported: give HOST:PORT only");
    size_t colon;
    if (!hp.empty() && hp.front() == '[') {
        size_t close = hp.find(']');
        if (close == std::string_view::npos) bad_url(whole, "unclosed '[' in host");
        e.host = ipv6_literal(hp.substr(1, close - 1), whole);
        colon = close + 1;
        if (colon >= hp.size() || hp[colon] != ':') bad_url(whole, "missing :PORT after the IPv6 address");
    } else {
        colon = hp.rfind(':');
        if (colon == std::string_view::npos) bad_url(whole, "missing :PORT");
        e.host = std::string(hp.substr(0, colon));
        if (e.host.find(':') != std::string::npos)
            bad_url(whole, "an IPv6 address must be in brackets, as in sluice://[::1]:PORT/");
        if (!e.host.empty() && !std::all_of(e.host.begin(), e.host.end(), host_name_char))
            bad_url(whole, "host '" + e.host + "' holds a character a host name cannot (letters, digits, '-', '.', '_')");
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

// sluice://HOST:PORT[/][?token=SECRET]. Strict: what is not understood is refused, naming the
// part, rather than read as something else (a "#x" as part of the token, "user@" as part of
// the host name).
Endpoint parse_url(std::string_view url) {
    constexpr std::string_view scheme = "sluice://";
    if (url.substr(0, scheme.size()) != scheme) bad_url(url, "it must start with sluice://");
    if (url.find('#') != std::string_view::npos)
        bad_url(url, "a '#fragment' is not part of a sluice:// URL (a '#' in a token is written %23)");
    std::string_view rest = url.substr(scheme.size());
    size_t end = rest.find_first_of("/?");
    Endpoint e;
    split_host_port(rest.substr(0, end), url, e);
    if (end == std::string_view::npos) return e;
    std::string_view tail = rest.substr(end);
    if (tail.front() == '/') tail.remove_prefix(1);
    if (tail.empty()) return e;
    if (tail.front() != '?') bad_url(url, "unexpected path after host:port (only '/' may follow it)");
    tail.remove_prefix(1);
    bool have_token = false;
    for (size_t params = 0; params < 64; ++params) { // a bound, not a limit anyone reaches
        size_t amp = tail.find('&');
        std::string_view kv = tail.substr(0, amp);
        size_t eq = kv.find('=');
        std::string_view key = kv.substr(0, eq);
        if (key == "token" && eq != std::string_view::npos) {
            if (have_token) bad_url(url, "token given twice");
            have_token = true;
            e.token = percent_decode(kv.substr(eq + 1), url);
            if (e.token.empty()) bad_url(url, "empty token");
        } else {
            bad_url(url, "unknown parameter '" + std::string(key) + "'");
        }
        if (amp == std::string_view::npos) return e;
        tail.remove_prefix(amp + 1);
    }
    bad_url(url, "too many parameters");
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
