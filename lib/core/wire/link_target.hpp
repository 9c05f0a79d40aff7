#pragma once
// Whether a symlink's target, read where the link lies, stays inside the tree the link is in.
// `sluice get` (issue 15) uses it on both sides: the server sends only the links of DIR that
// pass, and the client's receiver refuses a link that does not (a hostile server's), so a get
// never leaves a link in DEST that leads out of it. Judged on the text alone, as rsync's
// --safe-links does: the links inside the tree are made later, so nothing is resolved here.
#include <string_view>

#include "core/wire/protocol.hpp"

namespace sluice::wire {

// link_path: '/'-separated, relative to the tree's root (already validated). True when target
// is relative, not empty, its '..' components all come first (a '..' after a name could climb
// out through a link to '.') and they do not climb above the root.
bool link_stays_inside(std::string_view link_path, std::string_view target);

// RecvOptions::confine_links: throws a protocol Error naming the entry when it is a symlink that
// does not stay inside, a hard link or a special file (kinds 5-9).
void check_confined_entry(const ManifestEntry& e);

} // namespace sluice::wire
