#pragma once
// The sluice wire protocol, version 1. docs/protocol.md is the normative description; this
// header holds its constants and the decoded form of each frame. All integers little-endian.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::wire {

inline constexpr std::array<unsigned char, 8> kMagic = {'S', 'L', 'U', 'I', 'C', 'E', '\r', '\n'};
inline constexpr uint16_t kVersion = 1;

// Bounds on everything read from the network. A peer exceeding one is a protocol error.
inline constexpr uint32_t kMaxPathBytes = 4095; // a relative path, without NUL
// The receiver's temporary names begin so (".sluice-part.<hash of the path>", and "<that>.j" for
// its journal), beside the final name: an entry named so would be taken for (and removed as)
// another entry's leftover, so none may be sent (a tree holding an unfinished transfer's files).
inline constexpr std::string_view kTempNamePrefix = ".sluice-part.";
inline constexpr uint32_t kMaxNameBytes = 255;  // one path component
inline constexpr uint32_t kMaxLinkTargetBytes = 4095;
inline constexpr uint32_t kMaxEntriesPerPage = 65536;
inline constexpr uint32_t kMaxControlPayload = 8u << 20; // manifest pages, acks, status
inline constexpr uint32_t kMaxBlockData = 64u << 20;     // data bytes in one BLOCK frame
inline constexpr uint32_t kMaxMessageBytes = 4096;       // text in STATUS / ABORT
inline constexpr uint16_t kMaxStreams = 128;
inline constexpr uint64_t kMaxFileSize = 1ull << 50; // 1 PiB: keeps offset + length far from overflow
inline constexpr uint32_t kMaxPiece = 1u << 20;      // data bytes in one BLOCK (a piece) of a pipe entry
// Data extents one sparse file may list (codec_sparse.cpp). 16 bytes each on the wire and in
// the receiver's file table, so at most 1 MiB per file; a sender with more merges the
// nearest ones (describing short holes as data) until it fits.
inline constexpr uint32_t kMaxExtentsPerFile = 65536;

// Hello feature bits (ServerHello.features: what the receiver supports; ClientHello.features:
// what the sender uses). Bits are allocated per issue (docs/protocol.md, "Handshake").
inline constexpr uint16_t kFeatureSparse = 1u << 1;  // manifest entries may list data extents
inline constexpr uint16_t kFeatureUpdate = 1u << 2;  // changed-block updates (reserved, issue 17)
// Tree metadata: entry kinds 5-9 (hard links, special files), entry flag bit 2 (metadata
// trailer) and TREE_OPTIONS (--delete). A sender without it sends none of them.
inline constexpr uint16_t kFeatureTreeMeta = 1u << 3;
// ServerHello only (issue 17, session 15; docs/protocol.md "Exact attributes"): the receiver
// removes the attributes and ACLs of an entry it keeps in place that the sender's list lacks,
// when TREE_OPTIONS says the list is complete. Past ClientHello's u8: the sender answers in
// TREE_OPTIONS' flags instead, and an older sender drops the unknown bit.
inline constexpr uint16_t kFeatureExactMeta = 1u << 8;
// Manifest entry flag bits (the entry's `flags u8`).
inline constexpr uint8_t kEntrySparse = 1u << 1; // a file's data extents follow its path and target

inline constexpr size_t kFrameHeaderBytes = 8;
inline constexpr size_t kBlockPrefixBytes = 24; // file_id, offset, checksum before the data
inline constexpr size_t kServerHelloBytes = 32;
inline constexpr size_t kClientHelloBytes = 80;
inline constexpr size_t kServerAuthBytes = 40;
inline constexpr size_t kNonceBytes = 16;
inline constexpr size_t kMacBytes = 32;
inline constexpr size_t kTransferIdBytes = 16;

enum class FrameType : uint8_t {
    manifest = 0x01,     // S->R control: a page of file entries
    manifest_ack = 0x02, // R->S control: page registered; ranges already verified (resume)
    manifest_end = 0x03, // S->R control: no more entries
    tree_options = 0x08, // S->R control, before the first MANIFEST: --delete and the filter rules it must respect
    update_params = 0x04, // S->R control: block size and --checksum for changed-block updates (issue 17)
    reuse = 0x05,         // S->R control: ranges of a file equal to the receiver's old version
    owner_names = 0x25,   // S->R control, before the page that first uses them: user and group names of ids
    block = 0x10,        // S->R data: file data at an offset, with its checksum
    stream_end = 0x11,   // S->R data: this stream carries no more blocks
    resend = 0x20,       // R->S control: a block failed its checksum, send it again
    all_verified = 0x21, // R->S control: every file of the manifest is complete; streams may end
    working = 0x22,      // R->S control: still doing work the sender waits for (empty; a keepalive)
    block_sums = 0x24,   // R->S control: XXH3 of each block of the receiver's old version of a file
    dry_run_items = 0x29,   // R->S control, --dry-run: what the receiver would change of a page's entries
    dry_run_deleted = 0x2a, // R->S control, --dry-run --delete: what the receiver would delete
    transfer_end = 0x30, // S->R control: every data stream has ended
    final_status = 0x31, // R->S control: the receiver's verdict
    abort = 0x3f,        // either way: the transfer is over, with a reason
    stream_resume = 0x50, // R->S data: a reopened stream; what the broken connection delivered (issue 16)
    files_done = 0x70,    // R->S control: how many announced files are complete (issue 19, announce window)
    certificate_accepted = 0x06, // R->S control, certificate mode: the receiver's handshake passed (empty; issue 18)
};
const char* frame_type_name(uint8_t type);

enum class Role : uint8_t { control = 0, data = 1 };
enum class AuthStatus : uint8_t {
    ok = 0,
    bad_token = 1,
    bad_version = 2,
    other_transfer = 3,
    bad_stream = 4,
    encryption_mismatch = 0x40, // one side encrypts and the other does not (h18's range)
};
const char* auth_status_text(AuthStatus s);

// pipe: a byte stream of unknown length (pipe mode); the only entry of its transfer.
// 5-9 (tree metadata, docs/protocol.md "Tree metadata"): hard_link names an earlier file
// entry of the transfer (link_target its path, EntryMeta::rdev its file id); the special
// files carry no data (devices their number in EntryMeta::rdev).
enum class EntryKind : uint8_t {
    file = 1, directory = 2, symlink = 3, pipe = 4,
    hard_link = 5, fifo = 6, char_device = 7, block_device = 8, socket = 9,
};
// ManifestEntry flags (the entry's flags byte): bit 2, an EntryMeta trailer follows the entry.
inline constexpr uint8_t kEntryHasMeta = 1u << 2;

// ABORT codes.
inline constexpr uint32_t kAbortFailed = 1;          // the side sending it failed; see the message
inline constexpr uint32_t kAbortSourceTruncated = 2; // pipe mode: the producer failed, the byte stream is cut short

struct FrameHeader {
    uint8_t type = 0;
    uint8_t flags = 0;
    uint32_t length = 0; // payload bytes after the header
};

// Feature bits of ServerHello.features (what the receiver supports / requires) and
// ClientHello.features (what the sender uses).
inline constexpr uint16_t kFeatureEncryption = 1u << 0; // TLS 1.3 after the hello (docs/protocol.md, "Encryption")

struct ServerHello {
    uint16_t version = kVersion;
    uint16_t features = 0; // kFeature* bits the receiver supports
    std::array<unsigned char, kNonceBytes> nonce{};
};

struct ClientHello {
    uint16_t version = kVersion;
    Role role = Role::control;
    uint16_t stream_index = 0; // 0 for control, 1..stream_count for data
    uint16_t stream_count = 0; // data streams in this transfer
    uint8_t features = 0;      // kFeature* bits the sender uses
    std::array<unsigned char, kTransferIdBytes> transfer_id{};
    std::array<unsigned char, kNonceBytes> nonce{};
    std::array<unsigned char, kMacBytes> mac{};
};

struct ServerAuth {
    AuthStatus status = AuthStatus::ok;
    std::array<unsigned char, kMacBytes> mac{};
};

// A byte range of a sparse file that holds data; everything between extents is a hole.
struct Extent {
    uint64_t offset = 0;
    uint64_t length = 0;
};

struct ManifestEntry {
    uint64_t file_id = 0;
    uint64_t size = 0;
    int64_t mtime_ns = 0;
    uint32_t mode = 0; // permission bits only (07777)
    EntryKind kind = EntryKind::file;
    std::string path;        // relative, '/'-separated, validated on decode
    std::string link_target; // symlinks only
    // kEntrySparse: data_extents lists where the file holds data (sorted, disjoint, inside
    // size, possibly none); the rest reads as zeros and is neither sent nor allocated.
    bool sparse = false;
    std::vector<Extent> data_extents;
};

// Owner, group, device number and extended attributes (POSIX ACLs travel as their
// system.posix_acl_* attributes) of one entry: kept beside the page, not in ManifestEntry,
// so an entry without metadata costs nothing more (codec_tree.cpp; limits there).
struct EntryMeta {
    static constexpr uint8_t kHasOwner = 1, kHasGroup = 2; // which of uid/gid (and names) were sent
    uint8_t flags = 0;
    uint32_t uid = 0, gid = 0;
    uint64_t rdev = 0; // devices: the device number; hard links: the target's file id
    std::string user, group; // names on the sender ("" if it has none): mapped by name on the receiver
    std::vector<std::pair<std::string, std::string>> xattrs;
};

// TREE_OPTIONS (codec_tree.cpp): what the receiver does with the tree beyond the manifest.
struct TreeOptionsFrame {
    static constexpr uint32_t kDelete = 1; // remove what the receiver has under the sent roots that the manifest lacks
    static constexpr uint32_t kDryRun = 2; // change nothing: report what would change (DRY_RUN_ITEMS, DRY_RUN_DELETED)
    static constexpr uint32_t kOwnerMaps = 4; // the sender's --usermap/--groupmap follow the rules
    static constexpr uint32_t kUserChown = 8;   // with kOwnerMaps: the usermap is the sender's --chown USER
    static constexpr uint32_t kGroupChown = 16; // with kOwnerMaps: the groupmap is the sender's --chown :GROUP
    // Only to a receiver offering kFeatureExactMeta: the attributes each entry's trailer lists
    // are all it has in these namespaces, so the receiver removes the others it finds there.
    static constexpr uint32_t kExactXattrs = 32;  // user.* and security.capability
    static constexpr uint32_t kExactTrusted = 64; // trusted.* (the sender could read them: root)
    static constexpr uint32_t kExactAcls = 128;   // system.posix_acl_access / _default
    static constexpr uint32_t kExactMask = kExactXattrs | kExactTrusted | kExactAcls;
    uint32_t flags = 0;
    std::vector<std::string> rules; // "+ PATTERN" / "- PATTERN": what --delete leaves alone
    std::string usermap, groupmap;  // kOwnerMaps: each at most kMaxPathBytes, no NUL
};

// OWNER_NAMES (codec_owner_names.cpp): the sender's name for each user and group id its
// entries carry, sent once per id before the first page that uses it (rsync's id lists).
struct OwnerName {
    bool group = false; // a group id; else a user id
    uint32_t id = 0;
    std::string name; // 1-255 bytes, no NUL
};
// Ids a transfer may name, per kind (users, groups): the receiver's table is bounded by it.
inline constexpr uint32_t kMaxOwnerNames = 65536;

struct ManifestPage {
    uint32_t seq = 0;
    std::vector<ManifestEntry> entries;
    std::vector<std::pair<uint32_t, EntryMeta>> meta; // (index in entries, its metadata), by index
};

struct ByteRange {
    uint64_t file_id = 0;
    uint64_t offset = 0;
    uint64_t length = 0;
};

struct ManifestAck {
    uint32_t seq = 0;
    std::vector<ByteRange> verified; // already on the receiver: the sender skips them
};

struct ManifestEnd {
    uint32_t page_count = 0;
    uint64_t file_count = 0;
    uint64_t total_bytes = 0;
};

// Changed-block updates (docs/protocol.md, "Updates by changed blocks").
struct UpdateParams {
    uint64_t block_size = 0; // the unit of BLOCK_SUMS and REUSE: the sender's --block-size
    bool checksum = false;   // compare content even when size and mtime match (--checksum)
};

struct BlockSums {
    uint64_t file_id = 0;
    uint64_t old_size = 0;     // size of the receiver's old version
    std::vector<uint64_t> sums; // XXH3-64 of each block_size block of it (the last one shorter)
};

struct Reuse {
    uint64_t file_id = 0;
    std::vector<Extent> ranges; // sorted, disjoint: equal in the old and the new version
};

// --dry-run (codec_dry_run.cpp; docs/protocol.md "Dry run"): one entry the receiver would
// change, by the sender's file id, and how (rsync's --itemize-changes letters).
struct DryRunItem {
    static constexpr uint16_t kNew = 1;     // absent, or of another kind: created (rsync's +++++++++)
    static constexpr uint16_t kContent = 2; // a symlink's target or a device's number differs (c)
    static constexpr uint16_t kSize = 4;    // s
    static constexpr uint16_t kTime = 8;    // t: the mtime differs
    static constexpr uint16_t kPerms = 16;  // p
    static constexpr uint16_t kOwner = 32;  // o
    static constexpr uint16_t kGroup = 64;  // g
    static constexpr uint16_t kAcl = 128;   // a: a POSIX ACL the sender sends differs or is missing
    static constexpr uint16_t kXattrs = 256; // x: an extended attribute the sender sends differs or is missing
    static constexpr uint16_t kAll = 511;
    uint64_t file_id = 0;
    uint16_t changes = 0; // never 0: an entry with nothing to change is not listed
};

// What a --dry-run --delete receiver would remove: relative paths, a directory after its contents.
struct DryRunDeleted {
    struct Path {
        std::string path; // the receiver's text: escape before showing it (printable())
        bool is_dir = false;
    };
    std::vector<Path> paths;
};
// The most a sender keeps of a receiver's deletion list; a receiver with more to delete says
// so as an error instead of a list cut short.
inline constexpr uint64_t kMaxDryRunDeleted = 1u << 20;
inline constexpr uint64_t kMaxDryRunDeletedBytes = 64u << 20;

struct BlockPrefix {
    uint64_t file_id = 0;
    uint64_t offset = 0;
    uint64_t checksum = 0; // XXH3-64 of the data
};

// ClientHello::features bit 4: the sender reopens a data stream that breaks (docs/protocol.md,
// "Stream reconnect"); the receiver then waits for it instead of failing the transfer.
inline constexpr uint8_t kFeatureStreamReconnect = 1u << 4;

// ClientHello::features bit 6 (issue 18, docs/protocol.md "Certificate mode"): in certificate
// mode the receiver's first control frame is CERTIFICATE_ACCEPTED and the sender opens no data
// stream before it. Negotiated, so neither side waits for or refuses a frame an older peer
// never sends or does not know.
inline constexpr uint8_t kFeatureCertificateVerdict = 1u << 6;

// ClientHello::features bit 7 (issue 19, docs/protocol.md "Announce window"): the receiver
// reports how many announced files are complete (FILES_DONE) and frees what completed files
// held; the sender keeps at most a window of files announced but not complete, so neither
// side's memory grows with the file count.
inline constexpr uint8_t kFeatureAnnounceWindow = 1u << 7;

// FILES_DONE: regular files of the manifest complete at the receiver so far (resumed, empty and
// updated ones included); never decreases, never more than the files announced. below: every
// regular file whose id is below it is complete (the receiver asks nothing more of it), so the
// sender may forget its records in id order; never decreases, never past the entries sent.
struct FilesDone {
    uint64_t files = 0;
    uint64_t below = 0;
};
inline constexpr uint32_t kFilesDoneBytes = 16;

// STREAM_RESUME: the blocks and bytes the broken connection of this stream delivered whole,
// the first `blocks` BLOCK frames the sender wrote to it, in order.
struct StreamResume {
    uint64_t blocks = 0;
    uint64_t bytes = 0;
};
inline constexpr uint32_t kStreamResumeBytes = 16;

struct StreamEnd {
    uint64_t blocks = 0;
    uint64_t bytes = 0;
};

struct TransferEnd {
    uint32_t data_streams = 0;
    uint64_t blocks = 0;
    uint64_t bytes = 0;
};

struct FinalStatus {
    uint32_t status = 0; // 0 complete and verified; otherwise see message
    uint64_t files_ok = 0;
    uint64_t files_failed = 0;
    uint64_t bytes = 0;
    std::string message;
};

struct Abort {
    uint32_t code = 0;
    std::string message;
};

} // namespace sluice::wire
