#include "proc_stat.hpp"

#include <dirent.h>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

namespace sluice::trace {
namespace {

// Fields after "(comm)", which may itself contain spaces and parentheses.
std::optional<std::vector<std::string>> stat_fields(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!f || !std::getline(f, line)) return std::nullopt;
    auto close = line.rfind(')');
    if (close == std::string::npos) return std::nullopt;
    std::istringstream rest(line.substr(close + 1));
    std::vector<std::string> out;
    for (std::string w; rest >> w;) out.push_back(w);
    return out;
}

} // namespace

std::optional<ProcTimes> read_proc_times(pid_t pid) {
    auto f = stat_fields(pid);
    // After comm: state(3) ... utime(14) stime(15) -> indexes 11 and 12.
    if (!f || f->size() < 13) return std::nullopt;
    double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
    return ProcTimes{std::stod((*f)[11]) / tick, std::stod((*f)[12]) / tick};
}

bool process_alive(pid_t pid) {
    auto f = stat_fields(pid);
    return f && !f->empty() && (*f)[0] != "Z" && (*f)[0] != "X";
}

std::vector<pid_t> list_threads(pid_t pid) {
    std::vector<pid_t> out;
    DIR* d = opendir(("/proc/" + std::to_string(pid) + "/task").c_str());
    if (!d) return out;
    while (auto* e = readdir(d))
        if (e->d_name[0] != '.') out.push_back(static_cast<pid_t>(std::stol(e->d_name)));
    closedir(d);
    return out;
}

} // namespace sluice::trace
