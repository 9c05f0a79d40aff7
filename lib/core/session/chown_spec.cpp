#include "core/session/chown_spec.hpp"

#include "sluice/error.hpp"

namespace sluice {

ChownMaps chown_maps(const std::string& spec, const std::string& usermap, const std::string& groupmap) {
    const size_t colon = spec.find(':');
    const std::string user = spec.substr(0, colon), group = colon == std::string::npos ? "" : spec.substr(colon + 1);
    if (group.find(':') != std::string::npos || (user.empty() && group.empty()))
        throw Error(ErrorCode::usage, "--chown '" + spec + "' is not USER, USER:GROUP or :GROUP");
    if (!user.empty() && !usermap.empty())
        throw Error(ErrorCode::usage, "--chown '" + spec + "' gives the user: --usermap cannot be given too");
    if (!group.empty() && !groupmap.empty())
        throw Error(ErrorCode::usage, "--chown '" + spec + "' gives the group: --groupmap cannot be given too");
    return ChownMaps{.usermap = user.empty() ? usermap : "*:" + user, .groupmap = group.empty() ? groupmap : "*:" + group};
}

} // namespace sluice
