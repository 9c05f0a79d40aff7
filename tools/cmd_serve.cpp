// `sluice serve DIR --http PORT`: serves DIR over HTTP/1.1 until SIGTERM or SIGINT, then
// drains (responses in flight finish) and exits 0.
#include <signal.h>
#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <thread>

#include "cli_args.hpp"
#include "commands.hpp"
#include "token.hpp"
#include "sluice/server.hpp"

namespace sluice::cli {

const char* const kServeHelp = R"(usage: sluice serve DIR [--http PORT] [--port PORT] [options]

Serves DIR to many clients over HTTP/1.1 (curl, wget -c, aria2c, browsers, fsspec): GET and
HEAD, one byte range per request, ETag/Last-Modified with 304s, keep-alive and pipelining,
directory listings (HTML, or JSON with ?format=json or Accept: application/json), and
/_stats (JSON counters). Nothing outside DIR is served or written. With --allow-upload, PUT
and POST store a file (a Content-Length or a chunked body; written to a temporary name in DIR,
renamed into place when the whole body arrived; a client that leaves mid-body leaves nothing).
With --port, also serves `sluice get` over sluice's protocol on PORT (N streams, checksums,
resume; the client connects out to PORT for every connection). Get rings (one io_uring
thread each, as many as --threads) read every request and send every file and tree (paced
by --get-rate-limit), in clear or encrypted as the client's receiver asks (TLS 1.3: every
client not on loopback), get --connect-back too (the ring connects out to the address the
request came from); no thread per get, said with -v and in /_stats.
With --port and --allow-upload, `sluice send PATH... sluice://HOST:PORT/?token=T` pushes files
and trees into DIR (a directory sent lands as DIR/NAME) with the guarantees of `sluice recv
DIR`: temporary names renamed once verified, resume, N streams, TLS off loopback, nothing
written outside DIR or through a symlink in it. The port reads the request on a ring; each
push's data streams are then received on that ring (no thread per stream), its control on 2
threads of its own (said with -v and in /_stats), at most --max-pushes at once. The token
lets a pusher write files, not act as this host's root: by default a push is stored as the
server's own user and group, without set-uid/set-gid bits, file capabilities, security.* or
trusted.* attributes, or ACLs naming users or groups; what was not kept is said to the
pusher, here and in /_stats.
With --cert and --key the HTTP port speaks HTTPS only (TLS 1.3, TLS_AES_128_GCM_SHA256, ALPN
http/1.1; the same rings: handshakes stepped on them, responses sealed from the page cache by
the record engine -v and /_stats name) and the URL printed is https://. With --port too, the
same certificate authenticates the sluice port to `sluice get --ca/--pin` (a TLS 1.3 handshake
on the request connection, stepped on the get ring); --ca, --pin and --crl make that port require
a client certificate (`sluice get --cert/--key`).
Prints the URL on the first line of stdout (with --port, the sluice:// URL on the second);
SIGTERM or SIGINT drains and exits 0.
Reads need a token ("Authorization: Bearer TOKEN" or ?token=TOKEN) unless --public. The
token comes from --token-file, --token or SLUICE_TOKEN; if none gives one, a random token is
made and printed in the URL.

options:
  --http PORT            HTTP port (default: one chosen by the system)
  --port PORT            serve `sluice get` on PORT (0: one chosen by the system)
  --max-gets N           get sessions sending at once; more are refused as busy (default 64)
  --get-rate-limit SIZE  bytes per second of each get session, e.g. 100M (default: unlimited)
  --mptcp                the --port listener takes Multipath TCP (and plain TCP) clients; -v
                         says per get session which its request came over
  --cert FILE            HTTPS, and the sluice port's certificate mode: the server's
                         certificate (PEM, leaf first; with --key)
  --key FILE             its private key (PEM); checked against --cert before listening
  --ca FILE              the sluice port requires a client certificate chaining to a CA in
                         FILE (PEM); needs --port and --cert
  --crl FILE             with --ca: refuse a client whose chain holds a certificate revoked
                         by the CRLs (PEM) in FILE
  --pin sha256:HEX       the sluice port requires a client certificate with this key;
                         repeatable (any one matches)
  --bind ADDR            address to listen on (default: all)
  --host NAME            host name to print in the URL (default: ADDR, else localhost)
  --threads N            ring threads (default: the online CPUs)
  --public               serve reads without a token (uploads always need it)
  --allow-upload         accept PUT and POST of files into DIR (else 403)
  --sync                 answer an upload only once it is durable (fsync file and directory)
  --max-upload-size SIZE larger bodies get 413 (default 1G)
  --max-uploads N        bodies received at once over all threads; more get 503 (default 64)
  --max-pushes N         pushes (sluice send into DIR, with --port) received at once; more are
                         refused as busy (default 16); they share one manifest budget (a
                         quarter of memory): a larger tree needs a lower N
  --push-keep-owners     a push keeps its owners and groups (mapped by name, as sluice recv
                         does: a backup fleet pushing as root); still no set-id bits, file
                         capabilities, security.* or trusted.* attributes
  --push-keep-privileges a push keeps everything a root sluice recv keeps: owners, set-uid and
                         set-gid bits, file capabilities, security.* and trusted.* attributes
                         (anyone with the token is then root on this host; implies
                         --push-keep-owners)
  --upload-timeout S     a whole body must arrive within S seconds (default 300)
  --token-file FILE      the token, from FILE (mode 0600 or stricter)
  --token SECRET         the token, on the command line (visible in ps: prefer the above)
  --max-connections N    connections held at once over all threads (default 16384)
  --request-timeout S    a request head must arrive within S seconds of its first byte (default 10)
  --idle-timeout S       close a keep-alive connection idle for S seconds (default 60)
  --send-timeout S       close a connection whose response makes no progress for S seconds (default 60)
  --json                 at exit, print the stats as one JSON object (last line of stdout)
  -v, --verbose          say which paths the engine uses
)";

namespace {

std::string random_token() {
    unsigned char raw[16];
    if (::getrandom(raw, sizeof raw, 0) != static_cast<ssize_t>(sizeof raw))
        throw Error(ErrorCode::internal, "getrandom: cannot make a token");
    static const char hex[] = "0123456789abcdef";
    std::string t;
    for (unsigned char b : raw) {
        t.push_back(hex[b >> 4]);
        t.push_back(hex[b & 15]);
    }
    return t;
}

} // namespace

int cmd_serve(int argc, char** argv) {
    Args a(argc, argv,
           {"--http", "--port", "--max-gets", "--get-rate-limit", "--bind", "--host", "--threads", "--token", "--token-file", "--max-connections", "--request-timeout",
            "--idle-timeout", "--send-timeout", "--max-upload-size", "--max-uploads", "--max-pushes", "--upload-timeout", "--cert", "--key",
            "--ca", "--crl", "--pin"},
           {"--public", "--allow-upload", "--sync", "--json", "--verbose", "-v", "--help", "-h", "--mptcp",
            "--push-keep-owners", "--push-keep-privileges"});
    if (a.flag("--help") || a.flag("-h")) {
        std::fputs(kServeHelp, stdout);
        return 0;
    }
    if (a.positionals().size() != 1) throw Error(ErrorCode::usage, "expected exactly one DIR (see sluice serve --help)");
    ServeOptions o;
    o.http_port = static_cast<uint16_t>(a.uint_value("--http", 0, 0, 65535));
    if (auto v = a.value("--bind")) o.bind_address = *v;
    o.threads = a.uint_value("--threads", 0, 1, 256);
    if (a.value("--port")) {
        o.get_sessions = true;
        o.port = static_cast<uint16_t>(a.uint_value("--port", 0, 0, 65535));
    }
    o.max_get_sessions = a.uint_value("--max-gets", 64, 1, 4096);
    if (auto v = a.value("--get-rate-limit")) o.get_rate_limit = parse_size(*v, "--get-rate-limit");
    o.get_mptcp = a.flag("--mptcp");
    if (o.get_mptcp && !o.get_sessions) throw Error(ErrorCode::usage, "--mptcp needs --port (it is for the sluice port's get sessions)");
    o.public_reads = a.flag("--public");
    o.allow_upload = a.flag("--allow-upload");
    o.sync_uploads = a.flag("--sync");
    if (auto v = a.value("--max-upload-size")) o.max_upload_bytes = parse_size(*v, "--max-upload-size");
    o.max_uploads = a.uint_value("--max-uploads", 64, 1, 65536);
    o.max_pushes = a.uint_value("--max-pushes", 16, 1, 4096);
    o.upload_timeout_ms = static_cast<int>(a.uint_value("--upload-timeout", 300, 1, 86400)) * 1000;
    if (a.flag("--push-keep-privileges")) o.push_trust = SenderTrust::full;
    else if (a.flag("--push-keep-owners")) o.push_trust = SenderTrust::owners;
    if (o.push_trust != SenderTrust::none && !(o.allow_upload && o.get_sessions))
        throw Error(ErrorCode::usage, "--push-keep-owners and --push-keep-privileges are for pushes: they need --port and "
                                      "--allow-upload");
    if ((o.sync_uploads || a.value("--max-upload-size") || a.value("--max-uploads") || a.value("--max-pushes") ||
         a.value("--upload-timeout")) &&
        !o.allow_upload)
        throw Error(ErrorCode::usage, "--sync and the upload limits need --allow-upload");
    o.max_connections = a.uint_value("--max-connections", 16384, 1, 4'000'000);
    o.request_timeout_ms = static_cast<int>(a.uint_value("--request-timeout", 10, 1, 86400)) * 1000;
    o.idle_timeout_ms = static_cast<int>(a.uint_value("--idle-timeout", 60, 1, 86400)) * 1000;
    o.send_timeout_ms = static_cast<int>(a.uint_value("--send-timeout", 60, 1, 86400)) * 1000;
    o.cert_file = a.value("--cert").value_or("");
    o.key_file = a.value("--key").value_or("");
    const Certificates clients = certificates_option(a);
    o.ca_file = clients.ca_file;
    o.pins = clients.pins;
    o.crl_file = clients.crl_file;
    o.verbose = a.flag("--verbose") || a.flag("-v");
    o.log = [](std::string_view line) { std::cerr << "sluice: " << printable(line) << "\n"; };
    const Token token = resolve_token(a, "");
    o.token = token.value;
    bool show_token = false;
    if (o.token.empty() && (!o.public_reads || o.allow_upload)) { // uploads always need one
        o.token = random_token();
        show_token = true;
    }
    if (token.from == TokenFrom::option) show_token = true;
    if (o.threads > 0 && o.max_connections < o.threads) o.max_connections = o.threads;

    // The signals are taken by one thread with sigwait, never by a handler: stop() locks.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr); // before any thread starts, so all inherit it
    Server server(a.positionals()[0], o);
    std::string host = a.value("--host").value_or(o.bind_address.empty() ? "localhost" : o.bind_address);
    if (host.find(':') != std::string::npos) host = "[" + host + "]";
    std::cout << (o.cert_file.empty() ? "http://" : "https://") << host << ":" << server.port() << "/" << (show_token ? "?token=" + o.token : "") << std::endl;
    if (o.get_sessions)
        std::cout << "sluice://" << host << ":" << server.get_port() << "/" << (show_token ? "?token=" + o.token : "")
                  << std::endl;
    if (o.verbose) {
        std::cerr << "sluice: " << (o.public_reads ? "public reads" : "a token is required") << "\n";
        if (o.allow_upload)
            std::cerr << "sluice: uploads allowed (token required, at most " << o.max_upload_bytes << " bytes each"
                      << (o.sync_uploads ? ", acknowledged when durable" : "") << ")\n";
        if (o.allow_upload && o.get_sessions)
            std::cerr << "sluice: pushes allowed on the sluice port (token required, at most " << o.max_pushes
                      << " at once; each received by a receiver of its own, on its own threads, not on the rings)\n"
                      << "sluice: what a push may store: " << server.stats().push_metadata << "\n";
    }
    std::atomic<bool> done{false};
    std::thread signals([&] {
        timespec tick{0, 200'000'000};
        while (!done.load()) {
            if (sigtimedwait(&set, nullptr, &tick) > 0) {
                server.stop();
                return;
            }
        }
    });
    struct Join {
        std::atomic<bool>& done;
        std::thread& t;
        ~Join() {
            done.store(true);
            if (t.joinable()) t.join();
        }
    } join{done, signals};
    // Joined before the server goes, never detached: a serve that ended within the wait left a
    // detached thread calling stats() on a destroyed server (a SEGV found by scripts/test-tsan).
    std::thread paths;
    Join join_paths{done, paths};
    if (o.verbose) {
        paths = std::thread([&server, &done] {
            // The paths are known once the threads have set up their rings.
            for (int i = 0; i < 30 && !done.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
            if (done.load()) return;
            ServeStats s = server.stats();
            std::cerr << "sluice: receive path: " << s.recv_path << "\nsluice: accept path: " << s.accept_path
                      << "\nsluice: cold reads: " << s.cold_check << "\nsluice: ring: " << s.ring_mode << "\n";
            if (s.https) std::cerr << "sluice: https: " << s.tls_path << "\n";
        });
    }
    server.run();
    ServeStats s = server.stats();
    if (a.flag("--json")) {
        std::cout << s.to_json() << std::endl;
    } else {
        std::cerr << "sluice: served " << s.requests << " requests, " << s.body_bytes_sent << " body bytes, "
                  << s.connections_accepted << " connections\n";
    }
    return 0;
}

} // namespace sluice::cli
