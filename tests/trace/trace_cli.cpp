// A stand-alone `sluice trace` for the tests, so they do not depend on the mover's CLI.
#include "trace_main.hpp"

int main(int argc, char** argv) {
    char name[] = "trace";
    argv[0] = name;
    return sluice_trace_main(argc, argv);
}
