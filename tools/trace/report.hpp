// The two renderings of a Report: a table for people, JSON for scripts (docs/trace-json.md).
#pragma once
#include "model.hpp"

#include <cstdio>
#include <string>

namespace sluice::trace {

void write_table(std::FILE* out, const Report& r);
void write_json(std::FILE* out, const Report& r);
std::string human_bytes(uint64_t b);

} // namespace sluice::trace
