// Writes a seed corpus of valid frames (one file each, first byte = the target selector of
// fuzz_entry.cpp) into the directory given, so the fuzzer starts from real protocol shapes.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "core/wire/codec.hpp"
#include "core/wire/codec_get.hpp"
#include "recv/store/journal.hpp"

using namespace sluice::wire;

static void put(const std::string& dir, const std::string& name, unsigned char selector, const Bytes& body) {
    std::string path = dir + "/" + name;
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return;
    std::fputc(selector, f);
    std::fwrite(body.data(), 1, body.size(), f);
    std::fclose(f);
}

int main(int argc, char** argv) {
    if (argc != 2) return 2;
    std::string dir = argv[1];
    ManifestPage c;
    c.seq = 1;
    ManifestEntry e;
    e.file_id = 0, e.kind = EntryKind::directory, e.path = "d", e.mode = 0755;
    c.entries.push_back(e);
    e.file_id = 1, e.kind = EntryKind::file, e.path = "d/file name", e.size = 12345, e.mode = 0644;
    c.entries.push_back(e);
    e.file_id = 2, e.kind = EntryKind::symlink, e.path = "d/link", e.size = 0, e.link_target = "../x";
    c.entries.push_back(e);
    Bytes b;
    encode_manifest(b, c);
    put(dir, "manifest", 0, b);
    put(dir, "manifest-payload", 4, Bytes(b.begin() + kFrameHeaderBytes, b.end()));
    b.clear();
    encode_manifest_ack(b, {1, {{1, 0, 4096}}});
    put(dir, "ack", 0, b);
    b.clear();
    encode_final_status(b, {1, 2, 3, 4, "message"});
    put(dir, "status", 0, b);
    b.clear();
    encode_abort(b, {1, "why"});
    put(dir, "abort", 0, b);
    b.clear();
    encode_transfer_end(b, {4, 10, 1000});
    put(dir, "transfer-end", 0, b);
    Bytes stream{7}; // piece size selector
    unsigned char prefix[32];
    encode_block_prefix(prefix, {1, 0, 99}, 10);
    stream.insert(stream.end(), prefix, prefix + 32);
    stream.insert(stream.end(), 10, 'x');
    encode_stream_end(stream, {1, 10});
    put(dir, "data-stream", 1, stream);
    // Back-to-back blocks split at odd places (selector 30: pieces of 31 bytes), as recv_write
    // and the socket paths see them.
    Bytes many{30};
    for (uint64_t i = 0; i < 3; ++i) {
        encode_block_prefix(prefix, {i, 0, i}, static_cast<uint32_t>(1 + i * 40));
        many.insert(many.end(), prefix, prefix + 32);
        many.insert(many.end(), 1 + i * 40, static_cast<unsigned char>('a' + i));
    }
    encode_stream_end(many, {3, 123});
    put(dir, "data-stream-blocks", 1, many);
    b.clear();
    ClientHello h;
    h.role = Role::data, h.stream_index = 1, h.stream_count = 2;
    encode_client_hello(b, h);
    put(dir, "client-hello", 2, b);
    b.clear();
    encode_server_hello(b, {});
    put(dir, "server-hello", 3, b);
    // Block placement on the direct path (selector 5): an 8 KiB file in a 2-page buffer, sent as
    // [1024, 8192) then [0, 1024), the layout that once zeroed bytes 1024-4095; and a file of
    // 4097 bytes cut at 1000 and 4000 over three streams.
    put(dir, "placement-head-last", 5, Bytes{0xff, 0x1f, 0x00, 1, 0xff, 0x03, 0xff, 0x1b, 0, 0});
    put(dir, "placement-odd-size", 5, Bytes{0x00, 0x10, 0x00, 0, 0xe7, 0x03, 0xb7, 0x0b, 0xff, 0x7f, 1, 0, 2, 0, 1, 2});
    b.assign(kServerAuthBytes, 0);
    put(dir, "server-auth", 6, b);
    auto text = [](std::string_view t) { return Bytes(t.begin(), t.end()); };
    put(dir, "terminal-text", 7, text("ok caf\xc3\xa9 \x1b[2J\x1b]0;title\x07\r\xe2\x80\xae\xc2\x9b\xff"));
    put(dir, "url", 8, text("sluice://127.0.0.1:7000/?token=abc"));
    put(dir, "url-ipv6", 8, text("sluice://[::1]:7000/?token=abc#frag"));
    put(dir, "url-user", 8, text("sluice://user@host:7000/"));
    // sluice serve's HTTP heads for selector 10: a pipelined pair with a range and validators,
    // and a target with escapes.
    put(dir, "http-get", 10,
        text("GET /a%20b/c.bin?token=t HTTP/1.1\r\nHost: x\r\nRange: bytes=10-99\r\nIf-None-Match: \"1-2-3\"\r\n"
             "If-Modified-Since: Tue, 24 Nov 2026 06:12:21 GMT\r\nConnection: keep-alive\r\n\r\n"
             "HEAD / HTTP/1.0\r\n\r\n"));
    put(dir, "http-target", 10, text("/dir/%2e%2e/x//y/./z"));
    put(dir, "http-chunked", 10, text("5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Sum: 1\r\n\r\nGET / HTTP/1.1"));
    // Get sessions' frames for selector 11 (the frame as it arrives, header first).
    b.clear();
    encode_get_hello(b, {});
    put(dir, "get-hello", 11, b);
    b.clear();
    GetRequest gq;
    gq.streams = 4, gq.reply_port = 40000, gq.receiver_token = "one-time", gq.path = "data/set";
    encode_get_request(b, gq);
    put(dir, "get-request", 11, b);
    b.clear();
    encode_get_reply(b, {GetStatus::ok, {}, 3, 12345, "1 entries not sent"});
    put(dir, "get-reply", 11, b);
    b.clear();
    encode_get_done(b, {0, ""});
    put(dir, "get-done", 11, b);
    b.clear();
    encode_get_attach(b, gq.nonce);
    put(dir, "get-attach", 11, b);
    // A real journal (two blocks) for selector 9: size and mtime as fuzz_entry.cpp reads them,
    // then the file's bytes.
    char tmpl[] = "/tmp/sluice-seed-journal.XXXXXX";
    if (const char* jd = ::mkdtemp(tmpl)) {
        const int dfd = ::open(jd, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
        const std::string temp = ".sluice-part.seed";
        sluice::journal::create(dfd, temp, 0x30000, 7);
        sluice::journal::append(dfd, temp, 0x30000, 7, 0, 0x10000, 1);
        sluice::journal::append(dfd, temp, 0x30000, 7, 0x20000, 0x10000, 2);
        const std::string jname = sluice::journal::name_for(temp);
        const int jfd = ::openat(dfd, jname.c_str(), O_RDONLY | O_CLOEXEC);
        Bytes j = {0x00, 0x00, 0x03, 0x00, 7, 0, 0, 0};
        unsigned char chunk[4096];
        for (ssize_t n; jfd >= 0 && (n = ::read(jfd, chunk, sizeof chunk)) > 0;) j.insert(j.end(), chunk, chunk + n);
        if (jfd >= 0) ::close(jfd);
        put(dir, "journal", 9, j);
        ::unlinkat(dfd, jname.c_str(), 0);
        ::close(dfd);
        ::rmdir(jd);
    }
    return 0;
}
