// grow_pipe: a caller's pipe the kernel will not grow is named (a slower path the stats must
// show); a file, which has no pipe buffer, is not.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>

#include "core/io/pipe.hpp"

using namespace sluice;

TEST_CASE("grow_pipe grows a pipe and says nothing") {
    Pipe p(65536);
    CHECK(grow_pipe(p.write_fd(), 1 << 20, "the output").empty());
    CHECK(::fcntl(p.write_fd(), F_GETPIPE_SZ) == (1 << 20));
}

TEST_CASE("grow_pipe names a pipe it could not grow") {
    Pipe p(65536);
    // A size the kernel refuses (EINVAL) stands for any refusal: pipe-max-size, the per-user limit.
    std::string why = grow_pipe(p.write_fd(), -1, "the output");
    CHECK(why.find("the output pipe stays at 64 KiB") == 0);
    CHECK(why.find("Invalid argument") != std::string::npos);
}

TEST_CASE("grow_pipe is silent on what is no pipe") {
    std::FILE* f = std::tmpfile();
    REQUIRE(f);
    CHECK(grow_pipe(::fileno(f), 1 << 20, "the output").empty());
    std::fclose(f);
}
