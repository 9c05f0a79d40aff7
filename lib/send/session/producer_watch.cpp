#include "send/session/producer_watch.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string_view>

namespace sluice {

namespace {

constexpr size_t kMaxExitsWhileScanning = 1 << 16;

std::string read_small_file(const std::string& path) {
    std::ifstream in(path);
    std::string s;
    std::getline(in, s, '\0');
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

// The fd's open flags, from /proc/PID/fdinfo/FD ("flags:\t0100001").
int fd_flags(const std::string& pid, const char* fd) {
    std::ifstream in("/proc/" + pid + "/fdinfo/" + fd);
    std::string key;
    while (in >> key) {
        if (key == "flags:") {
            std::string v;
            in >> v;
            return static_cast<int>(std::stol(v, nullptr, 8));
        }
    }
    return -1;
}

std::string describe_exit(int pid, const std::string& comm, int status) {
    std::string who = "the producer (pid " + std::to_string(pid) + ", " + comm + ")";
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        const char* name = sigabbrev_np(sig);
        return who + " was killed by signal " + std::to_string(sig) + (name ? std::string(" (SIG") + name + ")" : "");
    }
    return who + " exited with status " + std::to_string(WEXITSTATUS(status));
}

} // namespace

ProducerWatch::ProducerWatch(int fd) {
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) return; // a file or socket: no producer
    if (!subscribe()) return;
    thread_ = std::thread([this] { run(); });
    find_writers(fd);
    std::lock_guard lk(mu_);
    scanning_ = false;
    std::map<int, int> kept;
    for (auto& [pid, status] : exits_)
        if (writers_.count(pid)) kept[pid] = status;
    exits_ = std::move(kept);
    if (writers_.empty())
        unavailable_ =
            "no other process holds the input pipe's write end (the producer has exited already): its exit status is unknown";
}

ProducerWatch::~ProducerWatch() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
}

bool ProducerWatch::subscribe() {
    netlink_.reset(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_CONNECTOR));
    sockaddr_nl addr{};
    addr.nl_family = AF_NETLINK;
    addr.nl_groups = CN_IDX_PROC;
    addr.nl_pid = 0;
    if (!netlink_ || ::bind(netlink_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        unavailable_ = std::string("cannot watch the producer's exit (process events connector: ") + std::strerror(errno) +
                       (errno == EPERM ? "; needs CAP_NET_ADMIN" : "") +
                       "): a producer that dies looks like the end of the byte stream";
        netlink_.reset();
        return false;
    }
    alignas(nlmsghdr) unsigned char msg[NLMSG_LENGTH(sizeof(cn_msg) + sizeof(proc_cn_mcast_op))] = {};
    auto* nl = reinterpret_cast<nlmsghdr*>(msg);
    nl->nlmsg_len = sizeof msg;
    nl->nlmsg_type = NLMSG_DONE;
    nl->nlmsg_pid = static_cast<__u32>(::getpid());
    auto* cn = static_cast<cn_msg*>(NLMSG_DATA(nl));
    cn->id.idx = CN_IDX_PROC;
    cn->id.val = CN_VAL_PROC;
    cn->len = sizeof(proc_cn_mcast_op);
    proc_cn_mcast_op op = PROC_CN_MCAST_LISTEN;
    std::memcpy(cn->data, &op, sizeof op);
    if (::send(netlink_.get(), &msg, sizeof msg, 0) != static_cast<ssize_t>(sizeof msg)) {
        unavailable_ = std::string("cannot watch the producer's exit (process events connector: ") + std::strerror(errno) +
                       "): a producer that dies looks like the end of the byte stream";
        netlink_.reset();
        return false;
    }
    return true;
}

void ProducerWatch::find_writers(int fd) {
    std::string target = "pipe:[" + std::to_string([&] {
                             struct stat st {};
                             ::fstat(fd, &st);
                             return st.st_ino;
                         }()) +
                         "]";
    const std::string self = std::to_string(::getpid());
    DIR* proc = ::opendir("/proc");
    if (!proc) return;
    std::map<int, std::string> found;
    while (dirent* d = ::readdir(proc)) {
        if (d->d_name[0] < '1' || d->d_name[0] > '9' || self == d->d_name) continue;
        std::string pid = d->d_name;
        std::string fddir = "/proc/" + pid + "/fd";
        DIR* fds = ::opendir(fddir.c_str());
        if (!fds) continue;
        while (dirent* f = ::readdir(fds)) {
            if (f->d_name[0] == '.') continue;
            char link[128];
            ssize_t n = ::readlinkat(::dirfd(fds), f->d_name, link, sizeof link - 1);
            if (n <= 0 || std::string_view(link, static_cast<size_t>(n)) != target) continue;
            int flags = fd_flags(pid, f->d_name);
            if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY) continue;
            found[std::stoi(pid)] = read_small_file("/proc/" + pid + "/comm");
            break;
        }
        ::closedir(fds);
    }
    ::closedir(proc);
    std::lock_guard lk(mu_);
    writers_ = std::move(found);
}

void ProducerWatch::run() {
    alignas(nlmsghdr) char buf[4096];
    while (!stop_) {
        pollfd p{netlink_.get(), POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0) continue;
        ssize_t n = ::recv(netlink_.get(), buf, sizeof buf, 0);
        if (n <= 0) continue;
        for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, static_cast<unsigned>(n)); h = NLMSG_NEXT(h, n)) {
            auto* cn = static_cast<cn_msg*>(NLMSG_DATA(h));
            if (cn->id.idx != CN_IDX_PROC || cn->id.val != CN_VAL_PROC) continue;
            auto* ev = reinterpret_cast<proc_event*>(cn->data);
            if (ev->what != proc_event::PROC_EVENT_EXIT) continue;
            // Only whole processes: a thread leaving is not the producer ending.
            if (ev->event_data.exit.process_pid != ev->event_data.exit.process_tgid) continue;
            int pid = ev->event_data.exit.process_tgid;
            std::lock_guard lk(mu_);
            if (scanning_ ? exits_.size() < kMaxExitsWhileScanning : writers_.count(pid) > 0)
                exits_[pid] = static_cast<int>(ev->event_data.exit.exit_code);
            cv_.notify_all();
        }
    }
}

std::optional<std::string> ProducerWatch::failure(int wait_ms) {
    if (!thread_.joinable()) return std::nullopt;
    std::unique_lock lk(mu_);
    cv_.wait_for(lk, std::chrono::milliseconds(wait_ms), [&] { return exits_.size() >= writers_.size(); });
    for (auto& [pid, status] : exits_)
        if (status != 0) return describe_exit(pid, writers_[pid], status);
    return std::nullopt;
}

} // namespace sluice
