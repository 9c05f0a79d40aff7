#include "core/io/rtt_deadlines.hpp"

#include <algorithm>
#include <cstdio>

#include "core/io/socket.hpp"

namespace sluice {

namespace {

// What the scaling asks for, in ms: 64 RTOs on a long path, 64 round trips on a short one.
uint64_t scaled_ms(uint32_t rtt_us) noexcept {
    const uint64_t rto_us = rtt_us >= kRtoScaleMinRttUs ? uint64_t{rtt_us} + kRtoFloorUs : uint64_t{rtt_us};
    return rto_us * kDeadlineRtos / 1000;
}

} // namespace

int rtt_scaled_ms(int floor_ms, uint32_t rtt_us) noexcept {
    if (floor_ms <= 0) return floor_ms; // none asked: none scaled
    const uint64_t scaled = scaled_ms(rtt_us);
    if (scaled <= static_cast<uint64_t>(std::max(floor_ms, 0))) return floor_ms;
    return static_cast<int>(std::min<uint64_t>(scaled, std::max(floor_ms, kDeadlineCeilingMs)));
}

RttDeadlines rtt_deadlines(int connect_floor_ms, int idle_floor_ms, uint32_t rtt_us) noexcept {
    return RttDeadlines{.rtt_us = rtt_us,
                        .connect_floor_ms = connect_floor_ms,
                        .idle_floor_ms = idle_floor_ms,
                        .connect_ms = connect_floor_ms > 0 ? rtt_scaled_ms(connect_floor_ms, rtt_us) : 0,
                        .idle_ms = rtt_scaled_ms(idle_floor_ms, rtt_us)};
}

namespace {

// "19.2 s (64 RTOs of RTT + 200 ms; asked 2 s)" or "60 s (asked; 64 round trips are 0.006 s)".
std::string choice_text(int chosen_ms, int floor_ms, uint32_t rtt_us) {
    const int rtts_ms = static_cast<int>(std::min<uint64_t>(scaled_ms(rtt_us), 1u << 30));
    std::string rtts = std::to_string(kDeadlineRtos) +
                       (rtt_us >= kRtoScaleMinRttUs ? " RTOs of RTT + " + std::to_string(kRtoFloorUs / 1000) + " ms"
                                                    : std::string(" round trips"));
    if (chosen_ms == floor_ms) return timeout_text(chosen_ms) + " (asked; " + rtts + " are " + timeout_text(rtts_ms) + ")";
    if (chosen_ms < rtts_ms) return timeout_text(chosen_ms) + " (the ceiling; " + rtts + " are " + timeout_text(rtts_ms) + ")";
    return timeout_text(chosen_ms) + " (" + rtts + "; asked " + timeout_text(floor_ms) + ")";
}

} // namespace

std::string deadlines_line(const RttDeadlines& d) {
    char rtt[48];
    if (d.rtt_us) std::snprintf(rtt, sizeof rtt, d.rtt_us < 1000 ? "%.3f ms" : "%.1f ms", d.rtt_us / 1e3);
    std::string line = "deadlines: control connection RTT " + (d.rtt_us ? std::string(rtt) : std::string("not measured")) +
                       "; idle timeout " + choice_text(d.idle_ms, d.idle_floor_ms, d.rtt_us);
    if (d.connect_ms) line += "; data stream connect " + choice_text(d.connect_ms, d.connect_floor_ms, d.rtt_us);
    return line;
}

} // namespace sluice
