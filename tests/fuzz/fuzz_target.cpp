// libFuzzer entry point (built only with -Dfuzz=true and clang; see scripts/fuzz).
#include "fuzz_entry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz_one(data, size);
    return 0;
}
