#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "cli_args.hpp"
#include "commands.hpp"
#include "progress_line.hpp"
#include "summary_line.hpp"
#include "token.hpp"
#include "sluice/sluice.hpp"

namespace sluice::cli {

const char* const kSendHelp = R"(usage: sluice send [options] PATH... sluice://HOST:PORT/?token=SECRET
       sluice send [options] PATH... --to HOST:PORT --token-file FILE
       SLUICE_TOKEN=SECRET sluice send [options] PATH... sluice://HOST:PORT/
       producer | sluice send [options] - sluice://HOST:PORT/?token=SECRET

Sends files and directories (recursively; symlinks as symlinks; mode and mtime kept) to a
receiver started with `sluice recv`. Each PATH lands under the receiver's DIR by its name.
With `-` as the only PATH, sends standard input as one byte stream, in order over all streams,
to a receiver started with `sluice recv --stdout` (spliced: no copy through user space).
A producer that dies instead of finishing (killed, or a non-zero exit) fails the transfer on
both sides where sluice can watch it (root or CAP_NET_ADMIN); otherwise -v says so.
The token comes from the URL, --token-file, --token or SLUICE_TOKEN (used only when none of
the others gives one); a URL token and an option that differ are refused.

options:
  --streams N          TCP data streams (default 4, 1-128)
  --block-size SIZE    bytes per block of a large file (default 8M; 64K-64M)
  --rate-limit RATE    cap the total rate in bytes per second (e.g. 400M)
  --send-path PATH     splice (default), sendfile, zc or read_send
  --to HOST:PORT       receiver address, instead of a sluice:// URL
  --token-file FILE    read the receiver's token from FILE (mode 0600 or stricter)
  --token SECRET       the receiver's token (visible to every local user in ps: prefer
                       --token-file or the SLUICE_TOKEN environment variable)
  --connect-timeout S  seconds to wait for a connection (default 10)
  --idle-timeout S     fail if the receiver is silent this long (default 60)
  --cc NAME            TCP congestion control of every connection (e.g. bbr, cubic;
                       default: the system's, net.ipv4.tcp_congestion_control)
  --encrypt            TLS 1.3 (AES-128-GCM) even to a receiver on a loopback address
                       (by default every peer not on loopback is encrypted)
  --no-encrypt         send in clear, also to a receiver not on loopback; the receiver
                       must be told the same, or the transfer is refused
  --json               print final stats as one JSON object on stdout
  -v, --verbose        say which data path and fallbacks are used
)";

int cmd_send(int argc, char** argv) {
    Args a(argc, argv,
           {"--streams", "--block-size", "--rate-limit", "--send-path", "--to", "--token", "--token-file", "--connect-timeout",
            "--idle-timeout", "--cc"},
           {"--json", "--verbose", "-v", "--help", "-h", "--encrypt", "--no-encrypt"});
    if (a.flag("--help") || a.flag("-h")) {
        std::fputs(kSendHelp, stdout);
        return 0;
    }
    std::vector<std::string> paths = a.positionals();
    Endpoint to;
    if (auto hp = a.value("--to")) {
        to = parse_host_port(*hp);
    } else {
        if (paths.empty() || paths.back().rfind("sluice://", 0) != 0)
            throw Error(ErrorCode::usage, "missing destination: give the receiver's sluice:// URL last, or --to HOST:PORT");
        to = parse_url(paths.back());
        paths.pop_back();
    }
    const Token token = resolve_token(a, to.token);
    if (token.from == TokenFrom::none)
        throw Error(ErrorCode::usage, "no token: the URL has none; give --token-file FILE or SLUICE_TOKEN (or --token, which "
                                      "every local user can read in ps)");
    to.token = token.value;
    if (paths.empty()) throw Error(ErrorCode::usage, "no PATH to send");
    const bool pipe = std::find(paths.begin(), paths.end(), "-") != paths.end();
    if (pipe && paths.size() != 1) throw Error(ErrorCode::usage, "'-' (standard input) must be the only PATH");

    SendOptions o;
    o.streams = a.uint_value("--streams", kDefaultStreams, 1, 128);
    if (auto v = a.value("--block-size")) o.block_size = parse_size(*v, "--block-size");
    if (auto v = a.value("--rate-limit")) o.rate_limit = parse_size(*v, "--rate-limit");
    if (auto v = a.value("--send-path")) o.path = parse_send_path(*v);
    o.connect_timeout_ms = static_cast<int>(a.uint_value("--connect-timeout", 10, 1, 3600)) * 1000;
    o.idle_timeout_ms = static_cast<int>(a.uint_value("--idle-timeout", 60, 1, 86400)) * 1000;
    if (auto v = a.value("--cc")) o.congestion_control = *v;
    o.encrypt = encrypt_option(a);
    o.verbose = a.flag("--verbose") || a.flag("-v");
    o.log = [](std::string_view line) { std::cerr << "sluice: " << printable(line) << "\n"; };
    if (o.verbose) std::cerr << "sluice: token from " << printable(token.source) << "\n";
    Progress progress;
    o.progress = &progress;

    Stats s;
    {
        ProgressLine line(progress, ::isatty(STDERR_FILENO));
        s = pipe ? send_pipe(STDIN_FILENO, to, o) : send(paths, to, o);
    }
    if (a.flag("--json")) {
        std::cout << s.to_json() << std::endl;
    } else {
        print_summary(s, "sent", pipe ? Moved::pipe : Moved::files);
    }
    for (const auto& f : s.fallbacks) std::cerr << "sluice: slower path: " << printable(f) << "\n";
    return 0;
}

} // namespace sluice::cli
