#pragma once
// A fresh directory under /tmp for tests that touch the file system, removed at scope exit
// (symlinks planted in it are removed, never followed).
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

#include "core/io/unique_fd.hpp"

namespace unit_test {

namespace fs = std::filesystem;

struct TempDir {
    fs::path path;
    TempDir() {
        char tmpl[] = "/tmp/sluice-unit-XXXXXX";
        if (!::mkdtemp(tmpl)) throw std::system_error(errno, std::generic_category(), "mkdtemp");
        path = tmpl;
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    sluice::UniqueFd open() const { return sluice::UniqueFd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)); }
};

} // namespace unit_test
