#pragma once
// Encoding and decoding of every frame. Decoders take the payload a FrameHeader announced
// and reject anything the protocol does not allow, with a message naming the field.
#include <span>
#include <vector>

#include "sluice/error.hpp"
#include "core/wire/protocol.hpp"

namespace sluice::wire {

using Bytes = std::vector<unsigned char>;
using Span = std::span<const unsigned char>;

void encode_server_hello(Bytes& out, const ServerHello& h);
void encode_client_hello(Bytes& out, const ClientHello& h);
void encode_server_auth(Bytes& out, const ServerAuth& a);
ServerHello decode_server_hello(Span in);
ClientHello decode_client_hello(Span in);
ServerAuth decode_server_auth(Span in);
// The part of a ClientHello its MAC covers (everything before the MAC).
Span client_hello_signed_part(Span encoded);

// Decodes the 8-byte header and checks the announced length against the bound of its type.
FrameHeader decode_frame_header(Span in);
void encode_frame_header(unsigned char out[kFrameHeaderBytes], FrameType type, uint32_t length);

void encode_manifest(Bytes& out, const ManifestPage& c);
void encode_manifest_ack(Bytes& out, const ManifestAck& a);
void encode_manifest_end(Bytes& out, const ManifestEnd& e);
void encode_stream_end(Bytes& out, const StreamEnd& e);
void encode_resend(Bytes& out, const ByteRange& r);
void encode_all_verified(Bytes& out);
void encode_working(Bytes& out);
void encode_transfer_end(Bytes& out, const TransferEnd& e);
void encode_final_status(Bytes& out, const FinalStatus& s);
void encode_abort(Bytes& out, const Abort& a);
// Changed-block updates (codec_update.cpp).
void encode_update_params(Bytes& out, const UpdateParams& p);
void encode_block_sums(Bytes& out, const BlockSums& s);
void encode_reuse(Bytes& out, const Reuse& r);
// Header + prefix of a BLOCK frame; the data follows on the wire (spliced, not copied).
void encode_block_prefix(unsigned char out[kFrameHeaderBytes + kBlockPrefixBytes], const BlockPrefix& p, uint32_t data_length);

ManifestPage decode_manifest(Span payload);
ManifestAck decode_manifest_ack(Span payload);
ManifestEnd decode_manifest_end(Span payload);
BlockPrefix decode_block_prefix(Span prefix24);
StreamEnd decode_stream_end(Span payload);
ByteRange decode_resend(Span payload);
TransferEnd decode_transfer_end(Span payload);
FinalStatus decode_final_status(Span payload);
Abort decode_abort(Span payload);
// Issue 16's stream reconnect (codec_reconnect.cpp).
void encode_stream_resume(Bytes& out, const StreamResume& r);
StreamResume decode_stream_resume(Span payload);
// Issue 19's announce window (codec_window.cpp).
void encode_files_done(Bytes& out, const FilesDone& d);
FilesDone decode_files_done(Span payload);
// Issue 18's certificate mode (codec_certificate.cpp): the receiver's verdict on the sender's
// certificate, which TLS 1.3 gives after the sender's handshake has ended.
void encode_certificate_accepted(Bytes& out);
UpdateParams decode_update_params(Span payload);
BlockSums decode_block_sums(Span payload);
Reuse decode_reuse(Span payload);

// Checks a relative path from the network: no empty, '.' or '..' components, no leading '/',
// no NUL, bounded lengths. Throws a protocol Error naming the path and the rule it broke.
void validate_relative_path(const std::string& path);

// An entry's metadata trailer (codec_tree.cpp). decode_entry_meta checks every length, count and
// ACL against the limits there; check_tree_entry the rules of kinds 5-9 for one decoded entry.
void encode_entry_meta(std::vector<unsigned char>& out, const EntryMeta& m);
class ByteReader;
EntryMeta decode_entry_meta(ByteReader& r, const std::string& path);
void check_tree_entry(const ManifestEntry& e, const EntryMeta* meta);
void encode_tree_options(Bytes& out, const TreeOptionsFrame& t);
TreeOptionsFrame decode_tree_options(Span payload);
// Owner names, once per id (codec_owner_names.cpp).
void encode_owner_names(Bytes& out, const std::vector<OwnerName>& names);
std::vector<OwnerName> decode_owner_names(Span payload);
// --dry-run's answers (codec_dry_run.cpp).
void encode_dry_run_items(Bytes& out, const std::vector<DryRunItem>& items);
std::vector<DryRunItem> decode_dry_run_items(Span payload);
void encode_dry_run_deleted(Bytes& out, const DryRunDeleted& d);
DryRunDeleted decode_dry_run_deleted(Span payload);

} // namespace sluice::wire
