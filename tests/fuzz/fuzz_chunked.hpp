#pragma once
#include <string_view>

// One input as a chunked request body (fuzz_chunked.cpp), under selector 10 beside the request
// head: aborts when a property of the decoder breaks.
void fuzz_chunked_body(std::string_view in);
