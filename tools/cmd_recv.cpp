#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "cli_args.hpp"
#include "commands.hpp"
#include "progress_line.hpp"
#include "summary_line.hpp"
#include "token.hpp"
#include "sluice/sluice.hpp"

namespace sluice::cli {

const char* const kRecvHelp = R"(usage: sluice recv [options] DIR
       sluice recv [options] --stdout [PORT | sluice://HOST:PORT/?token=SECRET] | consumer

Listens for one transfer, prints the connection string a sender needs
(sluice://HOST:PORT/?token=SECRET) on the first line of stdout, receives into DIR, and
exits 0 once every file is complete, verified and renamed into place.
With --stdout, receives one byte stream (`producer | sluice send - URL`) and writes it to
standard output in order (spliced when stdout is a pipe or file); the connection string and
stats go to stderr. A PORT or URL argument fixes the port (and the URL's token).
The token comes from --token-file, --token, the URL argument, or else SLUICE_TOKEN; if none
gives one, a random token is made. The printed line carries the token only when it was made
or given with --token and no --url-file is given: a token kept out of argv stays out of logs.

options:
  --stdout             receive a byte stream and write it to standard output
  --port P             port to listen on (default: one chosen by the system)
  --bind ADDR          address to listen on (default: all)
  --host NAME          host name or address to print in the connection string
  --token-file FILE    use the token in FILE (mode 0600 or stricter) instead of a random one
                       (lets a resume reuse it); the printed line then leaves it out
  --token SECRET       the same from the command line, where every local user can read it
                       in ps: prefer --token-file or the SLUICE_TOKEN environment variable
  --url-file FILE      also write the connection string with the token to FILE, created
                       with mode 0600 (FILE must not exist); the printed line leaves it out
  --recv-path PATH     direct (default: O_DIRECT writes from the receive buffers),
                       recv_write (buffered writes), splice, or null (discard the data)
  --sink null          same as --recv-path null: measure the sender alone
  --sync               fsync files and directories before reporting success
  --verify             before renaming a file into place, read it back from disk (O_DIRECT)
                       and check every block received in this run against the sender's checksum
  --sums-cache DIR     keep the block sums of large files received here in DIR, so the next
                       update of one does not read it whole (default $XDG_CACHE_HOME/sluice/
                       block-sums, else ~/.cache/sluice/block-sums; docs/guarantees.md)
  --no-sums-cache      keep none: every update reads the receiver's old version to hash it
  --max-files N        refuse manifests with more entries (default 10000000)
  --max-manifest-bytes SIZE  refuse a manifest needing more receiver memory (default: 1/4 of RAM)
  --usermap FROM:TO,...   map the sender's users to ours, as rsync's --usermap: FROM a name,
                       a wildcard (* ? [..]) on the sender's name, an id, or LOW-HIGH ids;
                       TO a name of this host or an id; the first match wins, else by name
  --groupmap FROM:TO,...  the same for groups
  --chown USER:GROUP   every entry's owner USER and group GROUP (names of this host or ids;
                       "USER" or ":GROUP" for one of them), as rsync's --chown
  --numeric-ids        keep owners by number alone (default: by the user and group names
                       the sender sends, where this host knows them, as rsync does)
  --idle-timeout S     fail if the sender is silent this long (default 60; at least 64 x (round
                       trip + 200 ms) of the control connection: -v and --json say)
  --cc NAME            TCP congestion control of every accepted connection (e.g. bbr,
                       cubic; default: the system's)
  --mptcp              listen with Multipath TCP (senders with --mptcp spread each connection
                       over several paths; plain TCP senders are still accepted): each
                       connection's outcome in -v and --json "mptcp_connections"
  --cert FILE, --key FILE  certificate mode: TLS 1.3 with this certificate and key (PEM) on
                       the control connection instead of the token's key; senders need --ca
                       or --pin (docs/guarantees.md, "Certificates")
  --ca FILE            certificate mode: require a sender certificate chaining to a CA in FILE
  --crl FILE           certificate mode, with --ca: refuse a sender whose chain holds a
                       certificate revoked by the CRLs (PEM) in FILE (each CA below the
                       trust anchor needs its CRL there)
  --pin sha256:HEX     certificate mode: require a sender certificate with this key; repeatable
  --json               print final stats as one JSON object (last line of stdout)
  -v, --verbose        say which data path is used and every refused connection
)";

namespace {

// Writes the --url-file and returns the line to print: the URL, without its token where the
// token was kept out of argv or goes to the --url-file instead.
std::string announce(const Args& a, const Receiver& rx, bool show_token) {
    if (auto f = a.value("--url-file")) write_url_file(*f, rx.url());
    if (show_token) return rx.url();
    Endpoint e = parse_url(rx.url());
    e.token.clear();
    return format_url(e);
}

// Stdout carries the data: everything else goes to stderr.
int receive_pipe(const Args& a, RecvOptions& o, bool show_token) {
    if (::isatty(STDOUT_FILENO))
        throw Error(ErrorCode::usage, "--stdout: standard output is a terminal; redirect it to a file or pipe it to a consumer");
    Progress progress;
    o.progress = &progress;
    Receiver rx(OutputFd{STDOUT_FILENO}, o);
    std::cerr << announce(a, rx, show_token) << std::endl;
    Stats s;
    {
        ProgressLine line(progress, ::isatty(STDERR_FILENO));
        s = rx.wait();
    }
    for (const auto& f : s.fallbacks) std::cerr << "sluice: slower path: " << printable(f) << "\n";
    if (a.flag("--json")) {
        std::cerr << s.to_json() << std::endl; // last line of stderr
    } else {
        print_summary(s, "received", Moved::pipe);
    }
    return 0;
}

// --sums-cache DIR, --no-sums-cache, else the user's cache directory (XDG), else none.
std::string sums_cache_option(const Args& a) {
    if (a.flag("--no-sums-cache")) {
        if (a.value("--sums-cache")) throw Error(ErrorCode::usage, "--sums-cache and --no-sums-cache contradict each other");
        return {};
    }
    if (auto v = a.value("--sums-cache")) {
        if (v->empty()) throw Error(ErrorCode::usage, "--sums-cache: expected a directory");
        return *v;
    }
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    if (xdg && xdg[0] == '/') return std::string(xdg) + "/sluice/block-sums";
    const char* home = std::getenv("HOME");
    if (home && home[0] == '/') return std::string(home) + "/.cache/sluice/block-sums";
    return {};
}

} // namespace

int cmd_recv(int argc, char** argv) {
    Args a(argc, argv,
           {"--port", "--bind", "--host", "--token", "--token-file", "--url-file", "--recv-path", "--sink", "--idle-timeout",
            "--max-files", "--max-manifest-bytes", "--cc", "--usermap", "--groupmap", "--cert", "--key", "--ca", "--crl", "--pin", "--chown", "--sums-cache"},
           {"--json", "--sync", "--verify", "--verbose", "-v", "--help", "-h", "--stdout", "--numeric-ids", "--encrypt", "--no-encrypt", "--mptcp",
            "--no-sums-cache"});
    if (a.flag("--help") || a.flag("-h")) {
        std::fputs(kRecvHelp, stdout);
        return 0;
    }
    const bool to_stdout = a.flag("--stdout");
    if (!to_stdout && a.positionals().size() != 1)
        throw Error(ErrorCode::usage, "expected exactly one DIR (see sluice recv --help)");
    if (to_stdout && a.positionals().size() > 1)
        throw Error(ErrorCode::usage, "--stdout takes at most one PORT or sluice:// URL, not a DIR");
    RecvOptions o;
    o.port = static_cast<uint16_t>(a.uint_value("--port", 0, 0, 65535));
    std::string url_token;
    if (to_stdout && a.positionals().size() == 1) {
        const std::string& where = a.positionals()[0];
        if (where.rfind("sluice://", 0) == 0) {
            Endpoint e = parse_url(where);
            o.port = e.port;
            url_token = e.token;
        } else {
            if (where.empty() || where.size() > 5 || where.find_first_not_of("0123456789") != std::string::npos ||
                std::stoul(where) > 65535)
                throw Error(ErrorCode::usage, "--stdout '" + where + "': expected a port (0-65535) or a sluice:// URL");
            o.port = static_cast<uint16_t>(std::stoul(where));
        }
    }
    if (auto v = a.value("--bind")) o.bind_address = *v;
    if (auto v = a.value("--host")) o.advertise_host = *v;
    const Token token = resolve_token(a, url_token);
    o.token = token.value; // empty: the receiver makes a random one
    const bool show_token = !token.kept_out_of_argv() && !a.value("--url-file");
    if (auto v = a.value("--recv-path")) o.path = parse_recv_path(*v);
    if (auto v = a.value("--sink")) {
        if (*v != "null") throw Error(ErrorCode::usage, "--sink '" + *v + "': only 'null' is supported");
        o.path = RecvPath::discard;
    }
    o.sync = a.flag("--sync");
    o.verify = a.flag("--verify");
    o.sums_cache = sums_cache_option(a);
    o.max_files = a.uint_value("--max-files", 10'000'000, 1, 1'000'000'000);
    if (auto v = a.value("--max-manifest-bytes"); v && !(o.max_manifest_bytes = parse_size(*v, "--max-manifest-bytes")))
        throw Error(ErrorCode::usage, "--max-manifest-bytes must be more than 0");
    o.idle_timeout_ms = static_cast<int>(a.uint_value("--idle-timeout", 60, 1, 86400)) * 1000;
    if (auto v = a.value("--cc")) o.congestion_control = *v;
    o.encrypt = encrypt_option(a);
    o.certificates = certificates_option(a);
    o.mptcp = a.flag("--mptcp");
    o.verbose = a.flag("--verbose") || a.flag("-v");
    o.numeric_ids = a.flag("--numeric-ids");
    if (auto v = a.value("--usermap")) o.usermap = *v;
    if (auto v = a.value("--groupmap")) o.groupmap = *v;
    if (auto v = a.value("--chown")) o.chown = *v;
    o.log = [](std::string_view line) { std::cerr << "sluice: " << printable(line) << "\n"; };
    if (o.verbose)
        std::cerr << "sluice: token " << (token.from == TokenFrom::none ? "made at random" : "from " + printable(token.source))
                  << "\n";
    Progress progress;
    o.progress = &progress;

    if (to_stdout) return receive_pipe(a, o, show_token);
    Receiver rx(a.positionals()[0], o);
    std::cout << announce(a, rx, show_token) << std::endl;
    if (o.verbose) std::cerr << "sluice: receive path: " << recv_path_name(o.path) << "\n";
    Stats s;
    {
        ProgressLine line(progress, ::isatty(STDERR_FILENO));
        s = rx.wait();
    }
    if (a.flag("--json")) {
        std::cout << s.to_json() << std::endl;
    } else {
        print_summary(s, "received", Moved::files);
    }
    return 0;
}

} // namespace sluice::cli
