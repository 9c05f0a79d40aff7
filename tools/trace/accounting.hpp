// Turns the probe's raw counters into stages: which bytes were copied between user and kernel
// space, which moved by page reference, which the kernel copied internally, which moved no data.
#pragma once
#include "model.hpp"
#include "op_names.hpp"
#include "proc_stat.hpp"

#include <cstdint>
#include <map>
#include <string>

namespace sluice::trace {

class BpfSession;
class FdResolver;

struct Classified {
    Kind kind;
    std::string note;
};

// The copy rules, one place. src/dst are the fd classes (none = user memory).
// writable: for vmsplice, the fd was opened for writing (user pages go into the pipe).
Classified classify(OpFamily family, const std::string& op, FdClass src, FdClass dst, bool writable);

Stage build_stage(uint32_t pid); // empty stage, for tests
// Adds one counter to a stage, updating every total and breakdown.
void add_flow(Stage& stage, Flow flow);

std::vector<Stage> build_stages(const BpfSession& probe, const FdResolver& resolver,
                                const std::map<uint32_t, ProcTimes>& proc_times);
// payload_override > 0 replaces the derived payload (see Methods::payload).
Summary summarize(const std::vector<Stage>& stages, uint64_t payload_override = 0);

} // namespace sluice::trace
