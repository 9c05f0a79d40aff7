#pragma once
// What the direct receive path did the slower way, and the text that says so (stats'
// fallbacks and a -v line): kept apart so the receiver holds only the flags.
#include <cstdint>
#include <string>

namespace sluice {

struct DirectFallbacks {
    bool direct_refused = false;  // the destination refuses O_DIRECT (e.g. ramfs)
    bool tmpfile_refused = false; // the destination has no O_TMPFILE
    uint64_t shared_page_writes = 0;
    std::string register_error; // registering the buffers failed: why
    std::string small;          // SmallDirectFiles::fallback()

    std::string text() const {
        std::string fb;
        auto add = [&fb](const std::string& s) { fb += (fb.empty() ? "" : "; ") + s; };
        if (direct_refused) add("direct: the destination refuses O_DIRECT (EINVAL): buffered writes");
        if (tmpfile_refused) add("direct: the destination has no O_TMPFILE: small files under temporary names");
        if (shared_page_writes)
            add("direct: " + std::to_string(shared_page_writes) +
                " block edge(s) off a 4 KiB page: those partial pages written through the page cache");
        if (!small.empty()) add(small);
        if (!register_error.empty()) add("direct: registering buffers failed (" + register_error + "): writes pin pages each time");
        return fb;
    }
};

} // namespace sluice
