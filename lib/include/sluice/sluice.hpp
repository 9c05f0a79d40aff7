#pragma once
// libsluice: move files and trees between hosts over several TCP streams, from the page cache
// to the socket without copies through user space.
//
//   sluice::Receiver rx("/data/in", {});          // listens; rx.url() is what a sender needs
//   ... on another host:
//   sluice::Stats s = sluice::send({"/data/out"}, sluice::parse_url(url), {});
//   ... back on the receiver:
//   sluice::Stats r = rx.wait();                   // returns once the transfer is verified
//
// Errors are thrown as sluice::Error (error.hpp) with a code and a message naming the path,
// host or value and the reason.
#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/error.hpp"
#include "sluice/export.hpp"
#include "sluice/progress.hpp"
#include "sluice/stats.hpp"
#include "sluice/url.hpp"

namespace sluice {

enum class SendPath { splice, sendfile, read_send, zc };
// Whether a sender paces its data streams together (SendOptions::pacing).
enum class Pacing { by_congestion_control, on, off };
enum class RecvPath { recv_write, splice, direct, discard };
SLUICE_EXPORT const char* send_path_name(SendPath p);
SLUICE_EXPORT const char* recv_path_name(RecvPath p);
SLUICE_EXPORT SendPath parse_send_path(std::string_view name);
SLUICE_EXPORT RecvPath parse_recv_path(std::string_view name);

// Called with one human-readable line: warnings (skipped entries) and, when verbose, the
// paths chosen. May be called from any of the transfer's threads, never concurrently.
using LogFn = std::function<void(std::string_view line)>;

// TLS 1.3 on every connection (docs/protocol.md, "Encryption"). automatic: on unless the peer
// is on a loopback address. Both sides must agree; a mismatch is refused (auth).
enum class Encrypt { automatic, on, off };

// Certificate mode (docs/guarantees.md, "Certificates"): the control connection's TLS 1.3
// handshake uses X.509 certificates instead of the token's PSK; the data streams then run PSK
// handshakes keyed from that session and the token (counted as resumed in Stats). The token
// still authorizes the transfer. Files are PEM. A receiver is in certificate mode when it has
// cert_file; a sender when it has ca_file or pins (it must verify the receiver). Both sides
// must be in the same mode (auth error otherwise). Needs encryption on.
struct Certificates {
    std::string cert_file; // this side's certificate (a chain: leaf first)
    std::string key_file;  // its private key
    std::string ca_file;   // the peer's certificate must chain to one of these (and, at a
                           // sender, name the receiver's host or IP address)
    // "sha256:HEX": SHA-256 of the peer's SubjectPublicKeyInfo (its public key, so a renewed
    // certificate with the same key still matches). Any one matches. Without ca_file the
    // chain and dates are not judged, only the key.
    std::vector<std::string> pins;
    // Certificate revocation lists (PEM, one or more; needs ca_file): a peer whose chain holds
    // a certificate they revoke is refused (auth error naming its subject and serial), and so
    // is one whose issuing CA has no CRL in the file. Read and checked before any connection.
    std::string crl_file;
    bool any() const {
        return !cert_file.empty() || !key_file.empty() || !ca_file.empty() || !pins.empty() || !crl_file.empty();
    }
};

inline constexpr unsigned kDefaultStreams = 4;
inline constexpr uint64_t kDefaultBlockSize = 8ull << 20;

inline constexpr unsigned kAutoMaxStreams = 16; // streams opened by --streams auto

struct SendOptions {
    unsigned streams = kDefaultStreams;
    // Open `streams` data streams but let only as many take work as the link rewards
    // (send/session/stream_governor.hpp); Stats::streams_used and streams_choice say how
    // many and why. Files only: pipe mode sends over every stream it opens.
    bool streams_auto = false;
    // Pace the data streams together once the pipe is full (send/session/stream_pacer.hpp):
    // each stream's pacing rate is capped at its share of the aggregate rate, and the caps are
    // lifted for good where the path loses packets on its own. by_congestion_control (the
    // default): on when the streams run bbr, off otherwise (CUBIC's streams back off on loss
    // and lose little to each other: 0.23% at 100 Mbit/s, 80 ms, 8 streams, where unpaced
    // BBR lost 12.9% and paced BBR 1.0%; docs/benchmarks.md, h16i). Stats::pacing_choice says
    // which and why, Stats::pacing what it did.
    Pacing pacing = Pacing::by_congestion_control;
    uint64_t block_size = kDefaultBlockSize;
    uint64_t rate_limit = 0; // bytes per second over all streams; 0 = unlimited
    SendPath path = SendPath::splice;
    int connect_timeout_ms = 10000;
    int idle_timeout_ms = 60000; // a peer silent for this long fails the transfer
    // A data stream whose connection breaks is reopened for up to this long and what it had
    // not delivered is sent again (issue 16); 0: a broken stream fails the transfer. Files
    // only (pipe mode fails as before). The receiver waits for the reopen up to its idle timeout.
    int retry_for_ms = 120000;
    // Before each block, wait until the receiver's TCP has acknowledged everything this data
    // stream wrote before it: a stream whose connection breaks then sends again at most the
    // block it was on (the receiver keeps what its TCP acknowledged), instead of everything its
    // socket buffers held. Costs about one round trip per block per stream (docs/benchmarks.md,
    // h16d). Files cut into blocks; batches of small files are not held. Needs retry_for_ms.
    bool bounded_resend = false;
    // At most this many regular files announced to the receiver and not yet complete there
    // (issue 19): the manifest waits for room, so neither side holds the whole file list.
    // 0: no window. Used where the receiver offers it (else the whole manifest goes at once).
    uint64_t announce_window = 16384;
    // TCP congestion control of every connection of the transfer (TCP_CONGESTION), e.g. "bbr"
    // or "cubic"; empty: the system's default. A name the kernel lacks is a usage error.
    std::string congestion_control;
    // Multipath TCP for every connection (IPPROTO_MPTCP): one connection spread over the paths
    // the kernel's path manager knows (`ip mptcp endpoint`), surviving the loss of one. Where
    // the kernel lacks it or has it off, or the receiver answers in plain TCP, the connection
    // carries on over TCP and Stats::mptcp_connections (and -v) says which and why.
    bool mptcp = false;
    // A file the receiver already has in another version is updated by changed blocks (the
    // receiver lists its blocks' XXH3, only differing blocks are sent). checksum: also compare
    // the content of files whose size and mtime match (otherwise those are skipped unread).
    bool checksum = false;
    Encrypt encrypt = Encrypt::automatic;
    Certificates certificates; // certificate mode: needs ca_file or pins (the receiver is verified)
    bool verbose = false;
    LogFn log;                                 // warnings and verbose lines; default: dropped
    Progress* progress = nullptr;              // optional counters to poll
    const std::atomic<bool>* cancel = nullptr; // set to true from any thread to stop
    // Where the transfer's connections come from: empty, a TCP connect to `to` for each; set,
    // called instead (from several threads at once) and returns a connected socket the sender
    // then owns, or throws sluice::Error (a get session whose client connected out to the
    // server: docs/protocol.md, "Get sessions"). `to` still names the peer and gives the token.
    std::function<int()> connection;

    // Trees as rsync -aHAX keeps them (docs/guarantees.md, "Tree metadata"). The sender sends
    // what is on; the receiver applies what it can and warns once per kind about the rest.
    bool hard_links = true; // files sharing an inode: sent once, linked on the receiver
    bool owner = true;      // uid and user name
    bool group = true;      // gid and group name
    bool xattrs = true;     // user., trusted., security. extended attributes (capabilities too)
    bool acls = true;       // POSIX ACLs (access and default)
    bool specials = true;   // fifos, sockets and devices re-created (else skipped with a warning)
    // Filter rules, "+ PATTERN" (include), "- PATTERN" (exclude) or ". FILE" (the rules in
    // FILE, --exclude-from), first match wins (docs/guarantees.md, "Filters").
    std::vector<std::string> filters;
    // --usermap / --groupmap given to the sender (rsync's FROM:TO,...): sent in TREE_OPTIONS and
    // applied by the receiver after its own maps' rules (docs/protocol.md, "Owner names").
    std::string usermap, groupmap;
    // rsync's --chown USER:GROUP ("USER", ":GROUP"): --usermap '*:USER' / --groupmap '*:GROUP'
    // for the receiver, which looks the names up; sends owner / group for the parts given.
    // Given with a --usermap (--groupmap) for the same part: Error(usage).
    std::string chown;
    // --delete: the receiver removes what it has under the sent directories that they no longer
    // hold (never what the filters exclude), once everything else is in place; listed in its
    // -v lines and its Stats::deleted.
    bool delete_extraneous = false;
    // --dry-run: the receiver compares and changes nothing; no data is sent. Stats::changes
    // lists what it would do (docs/protocol.md "Dry run"). Not with checksum (the receiver
    // would have to read every file) or with FdSources' send().
    bool dry_run = false;
};

// Sends files, directories (recursively, relative to their parent) and symlinks to a
// receiver. Returns once the receiver has verified everything; throws otherwise.
SLUICE_EXPORT Stats send(const std::vector<std::string>& paths, const Endpoint& to, const SendOptions& options);

// A range of an open file to send, stored under `name` at the receiver.
struct FdSource {
    int fd = -1;         // borrowed: stays the caller's, must stay open until send() returns
    uint64_t offset = 0; // first byte of the range in the file
    uint64_t length = 0; // bytes to send from offset; must lie within the file
    std::string name;    // relative path at the receiver ('/'-separated, no '..')
    uint32_t mode = 0644;
    int64_t mtime_ns = -1; // -1: the file's own mtime
};
// Sends ranges of open files; same guarantees as send(paths). An fd may also be an open
// directory (sent as a directory entry: made even when empty, with mode and mtime) or a
// symlink opened with O_PATH | O_NOFOLLOW (sent as a symlink entry with the target it holds);
// both need offset and length 0. A directory must come before the entries under it.
SLUICE_EXPORT Stats send(const std::vector<FdSource>& files, const Endpoint& to, const SendOptions& options);

// Pipe mode (the `producer | nc` replacement): sends what can be read from fd until end of
// file (a pipe, socket or file), in order over all streams, to a receiver writing to an fd or
// a Sink. fd is borrowed. Pipe data is moved to the sockets with splice, not copied.
SLUICE_EXPORT Stats send_pipe(int fd, const Endpoint& to, const SendOptions& options);

// How far a receiver trusts its sender with owners and privileges (docs/guarantees.md, "What a
// pusher may store"). A sender that can make the receiver chown files to any user, store
// set-uid files or file capabilities, or write trusted.* / security.* attributes can raise its
// privileges on the receiving host when the receiver runs as root.
enum class SenderTrust {
    // Everything the sender sends is kept where this side can (as rsync -a): `sluice recv`,
    // whose sender is the one who started it. The default.
    full,
    // Owners and groups kept (mapped by name, as full); no set-uid / set-gid bits (sticky only
    // on directories), no file capabilities, no security.* or trusted.* attributes: user.*
    // attributes and ACLs only. `sluice serve --push-keep-owners`.
    owners,
    // Every entry is this receiver's own user and group (no chown), no set-id bits (sticky only
    // on directories), only user.* attributes and ACLs that name no user or group beyond
    // owner, group, other and mask. `sluice serve`'s pushes by default.
    none,
};

struct RecvOptions {
    std::string bind_address;   // empty: all addresses
    std::string advertise_host; // host put into url(); empty: this host's primary address
    uint16_t port = 0;          // 0: the kernel picks one
    std::string token;          // empty: a random one
    RecvPath path = RecvPath::direct;
    bool sync = false;   // fsync files and directories before reporting success
    bool verify = false; // re-read each file from disk (O_DIRECT) and check every block before renaming it
    // Where the block sums of files this receiver writes are kept for the next update of them
    // (docs/guarantees.md, "The block-sums cache"); empty: none kept. The CLI's default is
    // $XDG_CACHE_HOME/sluice/block-sums (else ~/.cache/sluice/block-sums).
    std::string sums_cache;
    uint64_t max_files = 10'000'000;
    // The most memory the receiver may hold for the manifest (entries, names, symlink targets,
    // verified ranges); a manifest needing more is refused. 0: a quarter of physical memory
    // (or of the cgroup's limit), at least 256 MiB.
    uint64_t max_manifest_bytes = 0;
    // Owners are kept by the names the sender sends where this host knows them (as rsync
    // does); true: by the numbers alone (--numeric-ids).
    bool numeric_ids = false;
    // rsync's --usermap / --groupmap: "FROM:TO,..." applied before the names (the first rule
    // matching the sender's id or name decides; docs/guarantees.md, "Owners by name"). A TO
    // this host does not know, or a rule that is not FROM:TO, fails the Receiver's constructor.
    std::string usermap, groupmap;
    // rsync's --chown USER:GROUP ("USER", ":GROUP"): every entry's owner / group is USER /
    // GROUP (a name this host must know, or a number); fails the constructor otherwise, and
    // with a --usermap (--groupmap) for the same part.
    std::string chown;
    // What of the sender's owners and privileges is kept (SenderTrust). What is not kept is
    // warned about once per kind (log, Stats::metadata_not_kept) and, below full, also told to
    // the sender in FINAL_STATUS (docs/protocol.md), whose log shows it.
    SenderTrust sender_trust = SenderTrust::full;
    // For a sender this side did not choose (sluice::get() sets it): refuse the transfer, naming
    // the entry, when a symlink's target is absolute or climbs out of the destination (see
    // docs/protocol.md, "Get sessions"), and when an entry is a hard link or a special file.
    bool confine_links = false;
    // The most data streams a sender may open (0: the protocol's 128). A control connection
    // whose hello asks for more is refused (bad stream): `sluice serve` holds a push to the
    // count its request asked, which its admission counted on.
    uint16_t max_streams = 0;
    int idle_timeout_ms = 60000;
    std::string congestion_control; // as SendOptions::congestion_control, for every accepted connection
    // Listen with an MPTCP socket (SendOptions::mptcp): it accepts MPTCP and plain TCP senders
    // alike; each accepted connection's outcome is in Stats::mptcp_connections.
    bool mptcp = false;
    Encrypt encrypt = Encrypt::automatic; // as SendOptions::encrypt, judged per connecting peer
    // Certificate mode: needs cert_file and key_file; ca_file or pins make the sender show a
    // certificate too (mutual TLS), else the token alone authorizes it.
    Certificates certificates;
    bool verbose = false;
    LogFn log;
    Progress* progress = nullptr;
};

// What a Sink is told about one file (tree transfers) or the byte stream (pipe transfers).
struct SinkEntry {
    uint64_t id = 0;
    std::string path;  // relative path as sent; the byte stream's name in pipe mode
    uint64_t size = 0; // pipe mode: 0 until the byte stream has ended
    uint32_t mode = 0;
    int64_t mtime_ns = 0;
    bool is_pipe = false;
};

// A caller-supplied destination instead of a directory. Data reaches it after its checksum
// matched. Tree transfers: write() is called from several stream threads at once, for
// different ranges, in no particular order. Pipe transfers: in byte order, one call at a
// time. An exception thrown from a callback fails the transfer with its message.
class SLUICE_EXPORT Sink {
public:
    virtual ~Sink() = default;
    virtual void write(const SinkEntry& entry, uint64_t offset, std::span<const std::byte> data) = 0;
    // Every byte of the entry was written (tree: once per file, also for empty files).
    virtual void entry_done(const SinkEntry&) {}
};

// Pipe transfers written to a caller's fd (for example stdout) in order; spliced from the
// sockets when fd is a pipe. Borrowed: the caller keeps ownership.
struct OutputFd {
    int fd = -1;
};

class Receiver {
public:
    // Validates the directory and starts listening; throws on a bad directory or port.
    SLUICE_EXPORT Receiver(const std::filesystem::path& dir, RecvOptions options);
    // Receives into a caller-owned sink, which must outlive the Receiver.
    SLUICE_EXPORT Receiver(Sink& sink, RecvOptions options);
    // Receives one pipe transfer into out.fd; a tree transfer is refused.
    SLUICE_EXPORT Receiver(OutputFd out, RecvOptions options);
    SLUICE_EXPORT ~Receiver();
    Receiver(const Receiver&) = delete;
    Receiver& operator=(const Receiver&) = delete;

    SLUICE_EXPORT std::string url() const;
    SLUICE_EXPORT uint16_t port() const;
    // Serves one transfer to completion. Throws if it failed; nothing incomplete is left
    // under a final name.
    SLUICE_EXPORT Stats wait();
    // Makes wait() return with a cancelled Error; safe from any thread.
    SLUICE_EXPORT void cancel();
    // A connection this side opened to the sender (sluice::get() when the server cannot
    // connect back), taken as if it had been accepted: the Receiver owns fd from here on, and
    // the handshake and token check are those of an accepted one. Safe from any thread, before
    // or during wait().
    SLUICE_EXPORT void adopt(int fd);

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

} // namespace sluice
