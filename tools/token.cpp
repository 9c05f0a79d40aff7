#include "token.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace sluice::cli {

namespace {

constexpr size_t kMaxTokenBytes = 4096;

[[noreturn]] void fail(const std::string& what, const std::string& why) { throw Error(ErrorCode::usage, what + ": " + why); }

struct Fd {
    int fd;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

} // namespace

std::string read_token_file(const std::string& path) {
    const std::string what = "--token-file '" + path + "'";
    Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY)};
    if (f.fd < 0) fail(what, std::strerror(errno));
    struct stat st = {};
    if (::fstat(f.fd, &st) != 0) fail(what, std::strerror(errno));
    if (S_ISDIR(st.st_mode)) fail(what, "is a directory");
    if (st.st_mode & 077) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        fail(what, std::string("its mode ") + mode +
                       " lets other users read or change the token; make it private first (chmod 600 '" + path + "')");
    }
    std::string token;
    char buf[kMaxTokenBytes + 2];
    for (;;) { // bounded: each read adds at least one byte until the limit
        ssize_t n = ::read(f.fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail(what, std::strerror(errno));
        if (n == 0) break;
        token.append(buf, static_cast<size_t>(n));
        if (token.size() > kMaxTokenBytes + 2) fail(what, "is longer than a token (4096 bytes at most)");
    }
    if (!token.empty() && token.back() == '\n') token.pop_back();
    if (!token.empty() && token.back() == '\r') token.pop_back();
    if (token.size() > kMaxTokenBytes) fail(what, "is longer than a token (4096 bytes at most)");
    if (token.empty()) fail(what, "is empty");
    if (token.find_first_of("\r\n") != std::string::npos)
        fail(what, "holds more than one line; a token file holds the token only");
    return token;
}

Token resolve_token(const Args& a, const std::string& url_token) {
    auto opt = a.value("--token");
    auto file = a.value("--token-file");
    if (opt && file) throw Error(ErrorCode::usage, "give --token or --token-file, not both");
    Token t;
    if (opt) {
        if (opt->empty()) throw Error(ErrorCode::usage, "--token must not be empty");
        t = Token{*opt, TokenFrom::option, "--token"};
    } else if (file) {
        t = Token{read_token_file(*file), TokenFrom::file, "--token-file '" + *file + "'"};
    }
    if (t.from != TokenFrom::none) {
        if (!url_token.empty() && url_token != t.value)
            throw Error(ErrorCode::usage,
                        "the token of " + t.source + " differs from the one in the URL; give one of them, or make them agree");
        return t;
    }
    if (!url_token.empty()) return Token{url_token, TokenFrom::url, "the URL"};
    if (const char* env = std::getenv("SLUICE_TOKEN"); env && *env) return Token{env, TokenFrom::env, "SLUICE_TOKEN"};
    return t;
}

void write_url_file(const std::string& path, const std::string& url) {
    const std::string what = "--url-file '" + path + "'";
    if (path.empty()) fail("--url-file", "must not be empty");
    std::string tmp = path + ".XXXXXX";
    Fd f{::mkostemp(tmp.data(), O_CLOEXEC)}; // O_CREAT | O_EXCL, mode 0600
    if (f.fd < 0) fail(what, std::string("cannot create a file beside it: ") + std::strerror(errno));
    struct Unlink {
        const std::string& p;
        ~Unlink() { ::unlink(p.c_str()); }
    } remove_tmp{tmp};
    if (::fchmod(f.fd, 0600) != 0) fail(what, std::strerror(errno));
    const std::string line = url + "\n";
    for (size_t done = 0; done < line.size();) {
        ssize_t n = ::write(f.fd, line.data() + done, line.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) fail(what, std::string("cannot write: ") + std::strerror(n < 0 ? errno : ENOSPC));
        done += static_cast<size_t>(n);
    }
    if (::link(tmp.c_str(), path.c_str()) != 0) {
        if (errno == EEXIST)
            fail(what, "already exists; sluice does not replace it (a file or symlink planted there must not get the "
                       "token): remove it first");
        fail(what, std::strerror(errno));
    }
}

} // namespace sluice::cli
