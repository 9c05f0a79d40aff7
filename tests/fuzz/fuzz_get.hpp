#pragma once
#include "core/wire/codec.hpp"

// One input as the first frame a get session's peer reads (fuzz_get.cpp): aborts when a
// property of the get codec breaks; a protocol Error is the expected answer to bad input.
void fuzz_get_frame(sluice::wire::Span in);
