#pragma once
// A file with holes lists its data extents in its manifest entry (where the receiver offered
// sparse files in its hello); only those are planned and sent. Where it did not, the holes go
// as zeros, said once in -v and in the stats' fallbacks. Walk thread only.
#include <cstdint>
#include <string>

#include "core/session/session_log.hpp"
#include "core/wire/protocol.hpp"
#include "sluice/progress.hpp"

namespace sluice {

class HoleDescriber {
public:
    // Before the walk: whether the receiver takes data extents.
    void set_receiver_takes(bool on) { takes_ = on; }
    void describe(wire::ManifestEntry& e, const std::string& src, Progress* progress, SessionLog& log);
    uint64_t hole_bytes() const { return holes_; }
    const std::string& fallback() const { return fallback_; } // empty if none
private:
    bool takes_ = false;
    uint64_t holes_ = 0; // bytes of holes described instead of sent
    std::string fallback_;
};

} // namespace sluice
