#pragma once
// The sluice wire protocol, version 1. docs/protocol.md is the normative description; this
// header holds its constants and the decoded form of each frame. All integers little-endian.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace sluice::wire {

inline constexpr std::array<unsigned char, 8> kMagic = {'S', 'L', 'U', 'I', 'C', 'E', '\r', '\n'};
inline constexpr uint16_t kVersion = 1;

// Bounds on everything read from the network. A peer exceeding one is a protocol error.
inline constexpr uint32_t kMaxPathBytes = 4095; // a relative path, without NUL
inline constexpr uint32_t kMaxNameBytes = 255;  // one path component
inline constexpr uint32_t kMaxLinkTargetBytes = 4095;
inline constexpr uint32_t kMaxEntriesPerPage = 65536;
inline constexpr uint32_t kMaxControlPayload = 8u << 20; // manifest pages, acks, status
inline constexpr uint32_t kMaxBlockData = 64u << 20;     // data bytes in one BLOCK frame
inline constexpr uint32_t kMaxMessageBytes = 4096;       // text in STATUS / ABORT
inline constexpr uint16_t kMaxStreams = 128;
inline constexpr uint64_t kMaxFileSize = 1ull << 50; // 1 PiB: keeps offset + length far from overflow
inline constexpr uint32_t kMaxPiece = 1u << 20;      // data bytes in one BLOCK (a piece) of a pipe entry

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
    block = 0x10,        // S->R data: file data at an offset, with its checksum
    stream_end = 0x11,   // S->R data: this stream carries no more blocks
    resend = 0x20,       // R->S control: a block failed its checksum, send it again
    all_verified = 0x21, // R->S control: every file of the manifest is complete; streams may end
    working = 0x22,      // R->S control: still doing work the sender waits for (empty; a keepalive)
    transfer_end = 0x30, // S->R control: every data stream has ended
    final_status = 0x31, // R->S control: the receiver's verdict
    abort = 0x3f,        // either way: the transfer is over, with a reason
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
enum class EntryKind : uint8_t { file = 1, directory = 2, symlink = 3, pipe = 4 };

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
    uint16_t features = 0;
    std::array<unsigned char, kNonceBytes> nonce{};
};

struct ClientHello {
    uint16_t version = kVersion;
    Role role = Role::control;
    uint16_t stream_index = 0; // 0 for control, 1..stream_count for data
    uint16_t stream_count = 0; // data streams in this transfer
    uint8_t features = 0;
    std::array<unsigned char, kTransferIdBytes> transfer_id{};
    std::array<unsigned char, kNonceBytes> nonce{};
    std::array<unsigned char, kMacBytes> mac{};
};

struct ServerAuth {
    AuthStatus status = AuthStatus::ok;
    std::array<unsigned char, kMacBytes> mac{};
};

struct ManifestEntry {
    uint64_t file_id = 0;
    uint64_t size = 0;
    int64_t mtime_ns = 0;
    uint32_t mode = 0; // permission bits only (07777)
    EntryKind kind = EntryKind::file;
    std::string path;        // relative, '/'-separated, validated on decode
    std::string link_target; // symlinks only
};

struct ManifestPage {
    uint32_t seq = 0;
    std::vector<ManifestEntry> entries;
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

struct BlockPrefix {
    uint64_t file_id = 0;
    uint64_t offset = 0;
    uint64_t checksum = 0; // XXH3-64 of the data
};

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
