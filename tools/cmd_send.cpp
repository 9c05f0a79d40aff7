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
The URL may also be the sluice port of `sluice serve DIR --port P --allow-upload`: PATHs are
then pushed into DIR as into `sluice recv DIR` (hard links as copies, no special files); a
serve that refuses (no --allow-upload, a wrong token, busy) is named with its reason, and what
it did not keep (owners, set-id bits, attributes it does not take from a pusher) is warned
about once per kind. --ca/--pin verify the serve's certificate on the request connection
before the push is asked for (--cert/--key where it asks for a client certificate).

options:
  --streams N|auto     TCP data streams: N fixed (1-128), or auto (the default): open 16,
                       send on 4 and double while the rate grows, stopping where the round
                       trip stands 1.2x above the path's lowest (a full bottleneck); a path
                       under 2 ms round trip keeps 4 (-v and --json say the count and why)
  --block-size SIZE    bytes per block of a large file (default 8M; 64K-64M)
  -c, --checksum       compare content even where size and mtime match (a file the
                       receiver has in another version is always updated by changed blocks)
  --rate-limit RATE    cap the total rate in bytes per second (e.g. 400M)
  --send-path PATH     splice (default), sendfile, zc or read_send
  --to HOST:PORT       receiver address, instead of a sluice:// URL
  --token-file FILE    read the receiver's token from FILE (mode 0600 or stricter)
  --token SECRET       the receiver's token (visible to every local user in ps: prefer
                       --token-file or the SLUICE_TOKEN environment variable)
  --connect-timeout S  seconds to wait for a connection (default 10; a data stream's: at least
                       64 x (the control connection's round trip + 200 ms))
  --idle-timeout S     fail if the receiver is silent this long (default 60; at least 64 x (round
                       trip + 200 ms) of the control connection: -v and --json say)
  --retry-for S        reopen a data stream whose connection breaks for up to S seconds and
                       send again what it had not delivered (default 120; 0: a break fails)
  --bounded-resend     before each block, wait until the receiver acknowledged the ones before
                       it: a broken data stream sends again at most one block (default off)
  --announce-window N  at most N files announced to the receiver and not yet complete there
                       (default 16384; 0: announce the whole list at once), so that neither
                       side's memory grows with the file count
  --cc NAME            TCP congestion control of every connection (e.g. bbr, cubic;
                       default: the system's, net.ipv4.tcp_congestion_control)
  --mptcp              Multipath TCP on every connection: one connection over every path the
                       kernel knows (ip mptcp endpoint), surviving the loss of one; where the
                       kernel, the receiver or the path lacks it, plain TCP, said in -v and
                       --json "mptcp_connections"
  --pace, --no-pace    pace the data streams together: once the link is full, cap each
                       stream's pacing rate at its share of the total (a stream that
                       cannot use its share leaves it to the others), lifted for good if
                       the path loses packets on its own (paths of 2 ms round trip or more;
                       default: on when the streams run bbr, with --streams auto once
                       the count is settled, off otherwise; -v and --json "pacing_choice"
                       say which and why)
  --encrypt            TLS 1.3 (AES-128-GCM) even to a receiver on a loopback address
                       (by default every peer not on loopback is encrypted)
  --no-encrypt         send in clear, also to a receiver not on loopback; the receiver
                       must be told the same, or the transfer is refused
  --ca FILE            certificate mode: the receiver's certificate must chain to a CA in
                       FILE (PEM) and name the host dialled (docs/guarantees.md, "Certificates")
  --crl FILE           certificate mode, with --ca: refuse a receiver whose chain holds a
                       certificate revoked by the CRLs (PEM) in FILE; each CA below the
                       trust anchor needs its CRL there
  --pin sha256:HEX     certificate mode: accept the receiver whose public key (SHA-256 of its
                       SubjectPublicKeyInfo) is HEX, without a CA; repeatable (any one matches)
  --cert FILE, --key FILE  certificate mode: this sender's certificate and key (PEM), for a
                       receiver that verifies senders; the token still authorizes the transfer
  --json               print final stats as one JSON object on stdout
  -v, --verbose        say which data path and fallbacks are used

tree metadata (on by default, as rsync -aHAX with --specials; the receiver keeps what its
privileges allow and warns once per kind about the rest: docs/guarantees.md):
  --no-hard-links      send each name of a multiply-linked file as its own copy
                       (default: files sharing an inode are sent once and linked; -H)
  --no-owner, --no-group   do not send the owner (uid and user name) / group (-o, -g)
  --no-xattrs          do not send extended attributes (user., trusted., security.; -X)
  --no-acls            do not send POSIX ACLs (-A)
  --usermap FROM:TO,...   --groupmap FROM:TO,...   owner maps for the receiver (rsync's
                       syntax, see sluice recv --help): applied after the receiver's own
  --chown USER:GROUP   the receiver gives every entry owner USER and group GROUP (its names
                       or ids; "USER" or ":GROUP" for one), as rsync's --chown
  --no-specials        skip fifos, sockets and devices with a warning (default: re-created)
filters (rsync's rules, a subset: docs/guarantees.md "Filters"; first match wins):
  --exclude PATTERN    leave out what PATTERN matches (repeatable)
  --include PATTERN    send what PATTERN matches even if a later --exclude matches it
  --exclude-from FILE  rules from FILE: "- PATTERN", "+ PATTERN" or a bare PATTERN per line
  --delete             the receiver removes what it has under the sent directories that they
                       no longer hold (never what the filters exclude; never outside its DIR,
                       never through a symlink); listed in its -v output and --json "deleted".
                       A directory where the source now has a file, symlink or special file
                       gives way once that entry is complete
  -n, --dry-run        change nothing on the receiver and send no data: list what a transfer
                       would do, one line per path as rsync -n --itemize-changes does
                       (">f.st...... path"; with --delete "*deleting   path"; --json "changes")
)";

int cmd_send(int argc, char** argv) {
    Args a(argc, argv,
           {"--streams", "--block-size", "--rate-limit", "--send-path", "--to", "--token", "--token-file", "--connect-timeout",
            "--idle-timeout", "--cc", "--retry-for", "--cert", "--key", "--ca", "--crl", "--pin", "--announce-window", "--exclude", "--include",
            "--exclude-from", "--usermap", "--groupmap", "--chown"},
           {"--json", "--verbose", "-v", "--help", "-h", "--no-hard-links", "--hard-links", "-H", "--no-owner", "--owner",
            "-o", "--no-group", "--group", "-g", "--no-xattrs", "--xattrs", "-X", "--no-acls", "--acls", "-A",
            "--no-specials", "--specials", "--delete", "--pace", "--no-pace", "--mptcp", "--bounded-resend", "--checksum", "-c", "--encrypt", "--no-encrypt",
            "--dry-run", "-n"});
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
    // auto by default (issue 16, h16o, h16q): on a path of 2 ms or more it moved at least 0.96x
    // of 4 fixed streams at 20 and 150 ms with 0-14% loss, 1.21x at 150 ms and 14% where the
    // search judges a count against its own noise (docs/benchmarks.md); under 2 ms it opens the 4
    // a fixed count would, without a search, so a LAN or loopback transfer pays nothing.
    if (!a.value("--streams") || a.value("--streams") == "auto") {
        o.streams_auto = true;
        o.streams = kAutoMaxStreams;
    } else {
        o.streams = a.uint_value("--streams", kDefaultStreams, 1, 128);
    }
    if (auto v = a.value("--block-size")) o.block_size = parse_size(*v, "--block-size");
    if (auto v = a.value("--rate-limit")) o.rate_limit = parse_size(*v, "--rate-limit");
    if (auto v = a.value("--send-path")) o.path = parse_send_path(*v);
    o.connect_timeout_ms = static_cast<int>(a.uint_value("--connect-timeout", 10, 1, 3600)) * 1000;
    o.idle_timeout_ms = static_cast<int>(a.uint_value("--idle-timeout", 60, 1, 86400)) * 1000;
    if (auto v = a.value("--cc")) o.congestion_control = *v;
    o.retry_for_ms = static_cast<int>(a.uint_value("--retry-for", 120, 0, 86400)) * 1000;
    if (a.flag("--pace") && a.flag("--no-pace")) throw Error(ErrorCode::usage, "--pace and --no-pace: give one of them");
    o.pacing = a.flag("--pace") ? Pacing::on : a.flag("--no-pace") ? Pacing::off : Pacing::by_congestion_control;
    o.mptcp = a.flag("--mptcp");
    o.bounded_resend = a.flag("--bounded-resend");
    o.announce_window = a.uint_value("--announce-window", 16384, 0, 1u << 30);
    o.encrypt = encrypt_option(a);
    o.certificates = certificates_option(a);
    o.verbose = a.flag("--verbose") || a.flag("-v");
    o.hard_links = !a.flag("--no-hard-links");
    o.owner = !a.flag("--no-owner");
    o.group = !a.flag("--no-group");
    o.xattrs = !a.flag("--no-xattrs");
    o.acls = !a.flag("--no-acls");
    if (auto v = a.value("--usermap")) o.usermap = *v;
    if (auto v = a.value("--groupmap")) o.groupmap = *v;
    if (auto v = a.value("--chown")) o.chown = *v;
    o.specials = !a.flag("--no-specials");
    o.delete_extraneous = a.flag("--delete");
    o.dry_run = a.flag("--dry-run") || a.flag("-n");
    for (const auto& [name, value] : a.in_order()) {
        if (name == "--exclude") o.filters.push_back("- " + value);
        if (name == "--include") o.filters.push_back("+ " + value);
        if (name == "--exclude-from") o.filters.push_back(". " + value);
    }
    o.checksum = a.flag("--checksum") || a.flag("-c");
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
    } else if (s.dry_run) {
        print_dry_run(s);
    } else {
        print_summary(s, "sent", pipe ? Moved::pipe : Moved::files);
    }
    for (const auto& f : s.fallbacks) std::cerr << "sluice: slower path: " << printable(f) << "\n";
    return 0;
}

} // namespace sluice::cli
