// InodeReaper (recv/store/inode_reaper.hpp): the old versions of replaced files are closed on
// threads of its own; every one handed to it is closed by the time it is destroyed, whether
// queued or closed by the caller past kMaxQueued.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "recv/store/inode_reaper.hpp"
#include "temp_dir.hpp"

using namespace sluice;

namespace {

bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

} // namespace

TEST_CASE("every inode handed to the reaper is closed when it is destroyed, past its queue bound too") {
    unit_test::TempDir dir;
    constexpr size_t kFiles = InodeReaper::kMaxQueued + 44;
    std::vector<int> fds;
    for (size_t i = 0; i < kFiles; ++i) {
        const std::string p = (dir.path / ("f" + std::to_string(i))).string();
        UniqueFd w(::open(p.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
        REQUIRE(w);
        REQUIRE(::write(w.get(), "data", 4) == 4);
        fds.push_back(::open(p.c_str(), O_PATH | O_CLOEXEC));
        REQUIRE(fds.back() >= 0);
        REQUIRE(::unlink(p.c_str()) == 0); // as the rename leaves the old version: no name
    }
    {
        InodeReaper reaper;
        for (int fd : fds) reaper.retire(UniqueFd(fd));
        CHECK(reaper.retired() == kFiles);
    }
    size_t open = 0;
    for (int fd : fds) open += is_open(fd);
    CHECK(open == 0);
}
