#include "target.hpp"

#include "error.hpp"

#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace sluice::trace {

Target::Target(const std::vector<std::string>& command) {
    int gate[2], err[2];
    if (pipe2(gate, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) throw_errno("pipe", errno);
    std::vector<char*> argv;
    for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);

    pid_ = fork();
    if (pid_ < 0) throw_errno("fork", errno);
    if (pid_ == 0) {
        close(gate[1]);
        close(err[0]);
        char c;
        // Wait until the tracer has attached; EOF (the tracer closed or died) also releases us,
        // so check the byte: only "g" means go.
        if (read(gate[0], &c, 1) != 1 || c != 'g') _exit(127);
        signal(SIGINT, SIG_DFL); // the tracer ignores these while the command runs
        signal(SIGTERM, SIG_DFL);
        execvp(argv[0], argv.data());
        int e = errno;
        (void)!write(err[1], &e, sizeof(e));
        _exit(127);
    }
    close(gate[0]);
    close(err[1]);
    gate_fd_ = gate[1];
    err_fd_ = err[0];
}

Target::~Target() {
    if (!released_ && pid_ > 0) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
    }
    if (gate_fd_ >= 0) close(gate_fd_);
    if (err_fd_ >= 0) close(err_fd_);
}

void Target::go() {
    released_ = true;
    if (write(gate_fd_, "g", 1) != 1) throw_errno("releasing the traced command", errno);
    close(gate_fd_);
    gate_fd_ = -1;
    int e = 0;
    // Blocks until exec succeeded (EOF via CLOEXEC) or failed (errno arrives).
    ssize_t n = read(err_fd_, &e, sizeof(e));
    if (n == sizeof(e)) {
        waitpid(pid_, nullptr, 0);
        reaped_ = true;
        status_ = 127;
        throw_errno("cannot run the command", e, 127);
    }
}

bool Target::poll_exit() {
    if (reaped_) return true;
    int st = 0;
    pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r != pid_) return false;
    reaped_ = true;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return true;
}

} // namespace sluice::trace
