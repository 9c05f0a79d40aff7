#pragma once
// A POSIX ACL value as the kernel stores it and the wire carries it (core/wire/acl_ids.hpp):
// version 2, then 8-byte little-endian (tag u16, perm u16, id u32) entries.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

inline std::string acl(std::initializer_list<std::array<uint32_t, 3>> entries) {
    std::string v(4, '\0');
    v[0] = 2;
    for (auto [tag, perm, id] : entries) {
        char e[8];
        for (int i = 0; i < 2; ++i) e[i] = static_cast<char>((tag >> (8 * i)) & 0xFF);
        for (int i = 0; i < 2; ++i) e[2 + i] = static_cast<char>((perm >> (8 * i)) & 0xFF);
        for (int i = 0; i < 4; ++i) e[4 + i] = static_cast<char>((id >> (8 * i)) & 0xFF);
        v.append(e, 8);
    }
    return v;
}
