#pragma once
// The token, kept out of argv. `--token SECRET` and a URL's ?token= are visible to every local
// user (ps, /proc/PID/cmdline) and stay in shell history; --token-file and SLUICE_TOKEN are
// not (/proc/PID/environ is readable only by the process's own user and root).
#include <string>

#include "cli_args.hpp"
#include "sluice/sluice.hpp"

namespace sluice::cli {

enum class TokenFrom { none, option, file, url, env };

struct Token {
    std::string value;
    TokenFrom from = TokenFrom::none;
    std::string source; // "--token", "--token-file 'F'", "the URL", "SLUICE_TOKEN": for messages
    // Where the token did not pass through argv, the receiver does not print it either.
    bool kept_out_of_argv() const { return from == TokenFrom::file || from == TokenFrom::env; }
};

// One token from --token, --token-file, the URL's token (url_token, empty if none) and the
// SLUICE_TOKEN environment variable. The command line wins over the environment (the usual
// rule: SLUICE_TOKEN is only a default); --token and --token-file exclude each other; and a
// token on the command line that differs from the URL's is a usage error naming both, since
// one of them is stale and guessing which would only fail later as "wrong token".
Token resolve_token(const Args& a, const std::string& url_token);

// The contents of a token file without its trailing newline. Refused (usage) when the file is
// empty, holds more than one line or more than 4096 bytes, or when its mode lets anyone but
// its owner read or write it, as ssh refuses such a private key: a token others can read lets
// them write into the receiver's DIR as the receiver's user, and one they can write lets them
// choose it.
std::string read_token_file(const std::string& path);

// Writes url and a newline to path, created with mode 0600 and never replacing anything there:
// written to a new temporary name beside it (O_EXCL), then hard-linked to path, which fails if
// path exists in any form (a planted file or symlink is not followed, nor overwritten). A reader
// that sees the file sees all of it.
void write_url_file(const std::string& path, const std::string& url);

} // namespace sluice::cli
