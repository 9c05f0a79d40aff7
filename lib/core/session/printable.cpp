// printable(): escaping text for a terminal (sluice/printable.hpp says what and why).
#include "sluice/printable.hpp"

#include <cstdint>

namespace sluice {

namespace {

constexpr char kHex[] = "0123456789abcdef";

void escape_byte(std::string& out, unsigned char b) {
    out += "\\x";
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
}

void escape_code_point(std::string& out, uint32_t cp) {
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out.push_back(kHex[(cp >> shift) & 15]);
}

// Code points a terminal acts on or that reorder the line, though valid UTF-8.
bool dangerous(uint32_t cp) {
    return (cp >= 0x80 && cp <= 0x9f)                      // C1 controls (CSI, OSC, NEL, ...)
           || cp == 0x061c || cp == 0x200e || cp == 0x200f // ALM, LRM, RLM
           || (cp >= 0x2028 && cp <= 0x202e)               // LS, PS, LRE, RLE, PDF, LRO, RLO
           || (cp >= 0x2066 && cp <= 0x2069);              // LRI, RLI, FSI, PDI
}

// Length of the valid UTF-8 sequence starting at s[i] (2-4) and its code point, or 0 when the
// byte at i does not start one (RFC 3629: no overlongs, no surrogates, nothing past U+10FFFF).
size_t utf8_sequence(std::string_view s, size_t i, uint32_t& cp) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf; // allowed range of the second byte
    if (b0 >= 0xc2 && b0 <= 0xdf) {
        len = 2;
        cp = b0 & 0x1f;
    } else if (b0 >= 0xe0 && b0 <= 0xef) {
        len = 3;
        cp = b0 & 0x0f;
        if (b0 == 0xe0) lo = 0xa0; // overlong
        if (b0 == 0xed) hi = 0x9f; // surrogates
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
        len = 4;
        cp = b0 & 0x07;
        if (b0 == 0xf0) lo = 0x90; // overlong
        if (b0 == 0xf4) hi = 0x8f; // past U+10FFFF
    } else {
        return 0;
    }
    if (i + len > s.size()) return 0;
    for (size_t k = 1; k < len; ++k) {
        const auto b = static_cast<unsigned char>(s[i + k]);
        if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xbf)) return 0;
        cp = (cp << 6) | (b & 0x3f);
    }
    return len;
}

} // namespace

std::string printable(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        const auto b = static_cast<unsigned char>(text[i]);
        if (b >= 0x20 && b < 0x7f) {
            out.push_back(static_cast<char>(b));
            ++i;
            continue;
        }
        uint32_t cp = 0;
        size_t len = b < 0x80 ? 0 : utf8_sequence(text, i, cp);
        if (len == 0) {
            escape_byte(out, b); // a C0 control, DEL, or a byte that is not valid UTF-8
            ++i;
        } else if (dangerous(cp)) {
            escape_code_point(out, cp);
            i += len;
        } else {
            out.append(text.substr(i, len));
            i += len;
        }
    }
    return out;
}

} // namespace sluice
