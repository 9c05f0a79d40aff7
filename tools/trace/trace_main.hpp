// Entry point of `sluice trace`, called by tools/main.cpp when built with SLUICE_HAVE_TRACE.
#pragma once

// argv[0] is "trace"; the rest are the arguments after `sluice trace`.
// Returns the traced command's exit status, or non-zero on a tracer error.
int sluice_trace_main(int argc, char** argv);
