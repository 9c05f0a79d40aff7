#pragma once
// Text for a terminal. Messages carry text from the network (a peer's ABORT reason, paths from
// its manifest) and from the file system; printed raw, an escape sequence in them can clear
// the screen, set the window title, rewrite earlier lines, or reorder what is shown (Unicode
// bidi controls). sluice::Error messages and log lines pass through printable() inside the
// library; programs that print other text (paths of their own) can use it too.
#include <string>
#include <string_view>

#include "sluice/export.hpp"

namespace sluice {

// Returns text with every byte or character that could change how a terminal shows it
// replaced by a visible escape, in the spirit of `ls -b`:
//   - C0 controls (incl. ESC, CR, LF, TAB, BEL), DEL, and bytes that are not part of valid
//     UTF-8 (stray continuations, overlong forms, surrogates, above U+10FFFF, truncated
//     sequences): \xHH per byte;
//   - C1 controls U+0080-U+009F (some terminals act on their UTF-8 form as on ESC [),
//     the bidi controls U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069, and the line and
//     paragraph separators U+2028, U+2029: \uHHHH.
// Valid printable UTF-8 ("café/日本") is kept as is. A backslash is not escaped, so that
// printable(printable(s)) == printable(s): a message can pass through it on both sides (the
// receiver's error travels to the sender as ABORT) without growing \\ chains; the price is
// that a name spelled with a literal "\x1b" prints like one holding ESC.
SLUICE_EXPORT std::string printable(std::string_view text);

} // namespace sluice
