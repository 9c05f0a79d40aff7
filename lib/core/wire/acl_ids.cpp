#include "core/wire/acl_ids.hpp"

#include <algorithm>
#include <vector>

namespace sluice::wire {

namespace {

constexpr uint16_t kTagUser = 2, kTagGroup = 8;
constexpr size_t kHeader = 4, kEntry = 8;

struct AclEntry {
    uint16_t tag, perm;
    uint32_t id;
};

uint32_t le(const std::string& v, size_t at, int bytes) {
    uint32_t x = 0;
    for (int i = bytes - 1; i >= 0; --i) x = (x << 8) | static_cast<unsigned char>(v[at + static_cast<size_t>(i)]);
    return x;
}

void put_le(std::string& v, size_t at, uint32_t x, int bytes) {
    for (int i = 0; i < bytes; ++i, x >>= 8) v[at + static_cast<size_t>(i)] = static_cast<char>(x & 0xFF);
}

bool whole(const std::string& v) { return v.size() >= kHeader && (v.size() - kHeader) % kEntry == 0; }

} // namespace

void map_acl_ids(std::string& value, const std::function<uint32_t(bool group, uint32_t id)>& fn) {
    if (!whole(value)) return;
    for (size_t at = kHeader; at < value.size(); at += kEntry) {
        const uint32_t tag = le(value, at, 2);
        if (tag == kTagUser || tag == kTagGroup) put_le(value, at + 4, fn(tag == kTagGroup, le(value, at + 4, 4)), 4);
    }
}

bool acl_names_someone(const std::string& value) {
    if (!whole(value)) return true;
    for (size_t at = kHeader; at < value.size(); at += kEntry) {
        const uint32_t tag = le(value, at, 2);
        if (tag == kTagUser || tag == kTagGroup) return true;
    }
    return false;
}

size_t normalize_acl(std::string& value) {
    if (!whole(value)) return 0;
    std::vector<AclEntry> e;
    e.reserve((value.size() - kHeader) / kEntry);
    for (size_t at = kHeader; at < value.size(); at += kEntry)
        e.push_back({static_cast<uint16_t>(le(value, at, 2)), static_cast<uint16_t>(le(value, at + 2, 2)), le(value, at + 4, 4)});
    std::stable_sort(e.begin(), e.end(), [](const AclEntry& a, const AclEntry& b) {
        return a.tag != b.tag ? a.tag < b.tag : a.id < b.id;
    });
    size_t kept = 0, merged = 0;
    for (size_t i = 0; i < e.size(); ++i) {
        const bool qualified = e[i].tag == kTagUser || e[i].tag == kTagGroup;
        if (kept && qualified && e[kept - 1].tag == e[i].tag && e[kept - 1].id == e[i].id) {
            e[kept - 1].perm |= e[i].perm;
            ++merged;
            continue;
        }
        e[kept++] = e[i];
    }
    value.resize(kHeader + kept * kEntry);
    for (size_t i = 0; i < kept; ++i) {
        const size_t at = kHeader + i * kEntry;
        put_le(value, at, e[i].tag, 2);
        put_le(value, at + 2, e[i].perm, 2);
        put_le(value, at + 4, e[i].id, 4);
    }
    return merged;
}

} // namespace sluice::wire
