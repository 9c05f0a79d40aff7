#pragma once
#include <cstddef>
#include <cstdint>

// Feeds one input to the decoder its first byte selects. A protocol Error is the expected
// answer to bad input; anything else (crash, other exception, sanitizer report) is a bug.
void fuzz_one(const uint8_t* data, size_t size);
