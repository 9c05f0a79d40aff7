#pragma once
// libsluice.so is built with hidden visibility (lib/meson.build): only what is marked
// SLUICE_EXPORT is in its dynamic symbol table, so programs can link against the public API
// and nothing else, and the internals (wire codec, rings, planner, destination tree) can change
// without breaking them. tests/install checks the exported list.
//
// Mark functions and out-of-line members one by one; mark a whole class only when programs
// need its vtable and typeinfo from the library (a class they derive from or catch, such as
// Sink and Error), since marking a class also exports any nested class defined in the library.
// Harmless when building against the static library or from a program.
#if defined(__GNUC__) || defined(__clang__)
#define SLUICE_EXPORT __attribute__((visibility("default")))
#else
#define SLUICE_EXPORT
#endif
