// `sluice get sluice://HOST:PORT/PATH DEST`: fetches a file or tree from `sluice serve --port`
// over sluice's protocol (sluice::get, sluice/get.hpp).
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "cli_args.hpp"
#include "commands.hpp"
#include "progress_line.hpp"
#include "summary_line.hpp"
#include "token.hpp"
#include "sluice/get.hpp"

namespace sluice::cli {

const char* const kGetHelp = R"(usage: sluice get sluice://HOST:PORT/PATH DEST [options]

Fetches PATH (a file or a directory, relative to the served DIR; '/' for all of it) from
`sluice serve DIR --port PORT` into the directory DEST, over sluice's protocol: several
streams, a checksum per block, and resume (run the same command again after an interruption
and only what DEST has not verified is sent). A file lands as DEST/NAME, a directory as
DEST/NAME/..., and all of DIR's entries directly in DEST, directories (empty ones too) and
symlinks whose target stays inside DEST included; other symlinks and special files are not
sent (the server says how many it left out), and a link out of DEST from the server is refused.
Every connection goes from this host to the server's port (it works behind NAT); with
--connect-back the server connects to a port this command listens on instead, at the
address the request came from (the way of servers from before GET_ATTACH).
The token comes from --token-file, --token, the URL's ?token= or SLUICE_TOKEN; a --public
server needs none, and a get given a token refuses a server that asks none (exit 3). In token
mode the transfer is keyed with a token bound to the server's (never with what the request
carries in clear); only --ca or --pin authenticates a --public server. With --ca or --pin the server is verified by its certificate (`serve --cert`)
in a TLS 1.3 handshake before the request is sent: a server without one, or whose certificate
does not verify, is refused (exit 3); the transfer is then encrypted.

options:
  --streams N          data streams (default 4)
  --recv-path PATH     direct (default), recv_write, splice, or null (verify and discard)
  --sync               fsync files and directories before reporting success
  --verify             read each file back from disk and check it before renaming it
  --connect-back       the server connects its streams to this host instead
  --bind ADDR          with --connect-back: address to listen on (default: all)
  --connect-timeout S  give up connecting to the server after S seconds (default 10)
  --idle-timeout S     fail if the server is silent this long (default 60; longer on a link
                       whose round trip makes it short: 64 x (RTT + 200 ms), -v and --json say)
  --mptcp              Multipath TCP on every connection (the server needs --mptcp too); where
                       the kernel, server or path lacks it, plain TCP, said per connection in -v
                       and --json "mptcp_connections"
  --encrypt            TLS 1.3 even from a server on loopback (a server elsewhere: the default)
  --no-encrypt         receive in clear, also from a server not on loopback
  --ca FILE            certificate mode: the server's certificate must chain to a CA in FILE
                       (PEM) and name the host of the URL (docs/guarantees.md, "Certificates")
  --crl FILE           certificate mode, with --ca: refuse a server whose chain holds a
                       certificate revoked by the CRLs (PEM) in FILE; each CA below the
                       trust anchor needs its CRL there
  --pin sha256:HEX     certificate mode: accept the server whose public key (SHA-256 of its
                       SubjectPublicKeyInfo) is HEX, without a CA; repeatable (any one matches)
  --cert FILE, --key FILE  certificate mode: this client's certificate and key (PEM), for a
                       server that verifies clients (serve --ca or --pin)
  --token-file FILE    the server's token, from FILE (mode 0600 or stricter)
  --token SECRET       the server's token on the command line (visible in ps)
  --json               print final stats as one JSON object on stdout
  -v, --verbose        say which data path is used
)";

namespace {

// sluice://HOST:PORT/PATH?query -> the endpoint's URL (sluice://HOST:PORT/?query) and PATH.
std::pair<std::string, std::string> split_get_url(const std::string& url) {
    constexpr std::string_view scheme = "sluice://";
    if (url.rfind(scheme, 0) != 0) throw Error(ErrorCode::usage, "the source must be a sluice://HOST:PORT/PATH URL");
    size_t slash = url.find('/', scheme.size());
    size_t q = url.find('?', scheme.size());
    if (slash == std::string::npos || (q != std::string::npos && q < slash)) return {url, ""};
    size_t end = q == std::string::npos ? url.size() : q;
    std::string path = url.substr(slash + 1, end - slash - 1);
    if (path.find('%') != std::string::npos)
        throw Error(ErrorCode::usage, "%-escapes in the path are not supported: give the name as it is (quoted for the shell)");
    return {url.substr(0, slash + 1) + url.substr(end), path};
}

} // namespace

int cmd_get(int argc, char** argv) {
    Args a(argc, argv,
           {"--streams", "--recv-path", "--bind", "--connect-timeout", "--idle-timeout", "--token", "--token-file", "--cert", "--key",
            "--ca", "--crl", "--pin"},
           {"--sync", "--verify", "--connect-back", "--json", "--verbose", "-v", "--help", "-h", "--mptcp", "--encrypt", "--no-encrypt"});
    if (a.flag("--help") || a.flag("-h")) {
        std::fputs(kGetHelp, stdout);
        return 0;
    }
    if (a.positionals().size() != 2) throw Error(ErrorCode::usage, "expected sluice://HOST:PORT/PATH and DEST (see sluice get --help)");
    auto [base, path] = split_get_url(a.positionals()[0]);
    Endpoint from = parse_url(base);
    from.token = resolve_token(a, from.token).value;

    GetOptions o;
    o.streams = a.uint_value("--streams", kDefaultStreams, 1, 128);
    if (auto v = a.value("--recv-path")) o.path = parse_recv_path(*v);
    if (auto v = a.value("--bind")) o.bind_address = *v;
    o.sync = a.flag("--sync");
    o.connect_back = a.flag("--connect-back");
    if (o.bind_address.size() && !o.connect_back) throw Error(ErrorCode::usage, "--bind needs --connect-back (otherwise nothing listens)");
    o.verify = a.flag("--verify");
    o.mptcp = a.flag("--mptcp");
    o.encrypt = encrypt_option(a);
    o.certificates = certificates_option(a);
    o.connect_timeout_ms = static_cast<int>(a.uint_value("--connect-timeout", 10, 1, 3600)) * 1000;
    o.idle_timeout_ms = static_cast<int>(a.uint_value("--idle-timeout", 60, 1, 86400)) * 1000;
    o.verbose = a.flag("--verbose") || a.flag("-v");
    o.log = [](std::string_view line) { std::cerr << "sluice: " << printable(line) << "\n"; };
    Progress progress;
    o.progress = &progress;
    Stats s;
    {
        ProgressLine line(progress, ::isatty(STDERR_FILENO));
        s = get(from, path, a.positionals()[1], o);
    }
    if (a.flag("--json")) {
        std::cout << s.to_json() << std::endl;
    } else {
        print_summary(s, "got", Moved::files);
    }
    for (const auto& f : s.fallbacks) std::cerr << "sluice: slower path: " << printable(f) << "\n";
    return 0;
}

} // namespace sluice::cli
