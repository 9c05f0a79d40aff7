#pragma once
// rsync's --chown USER:GROUP (also "USER", "USER:" and ":GROUP"): every entry the receiver
// writes gets owner USER and group GROUP. As in rsync it is --usermap '*:USER' --groupmap
// '*:GROUP' (the names are the receiver's, looked up there), so it travels and is applied as
// owner maps are (docs/protocol.md "Owner names"); only the option named in errors differs.
#include <string>

namespace sluice {

struct ChownMaps {
    std::string usermap, groupmap; // "" for the part not given
};

// Throws Error(usage) naming the value for an empty USER:GROUP, more than one ':', and when
// --usermap / --groupmap are given too (rsync refuses that as well: which would decide?).
ChownMaps chown_maps(const std::string& spec, const std::string& usermap, const std::string& groupmap);

} // namespace sluice
