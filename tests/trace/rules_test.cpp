// The copy rules and the summary arithmetic, on synthetic stages (no root, no BPF).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "accounting.hpp"
#include "op_names.hpp"
#include "trace.h"

using namespace sluice::trace;

namespace {

Flow flow(const std::string& op, OpFamily fam, FdClass from, FdClass to, uint64_t bytes) {
    Flow f;
    f.op = op;
    f.via = "syscall";
    f.from = from;
    f.to = to;
    auto c = classify(fam, op, from, to, false);
    f.kind = c.kind;
    f.note = c.note;
    f.bytes = bytes;
    f.calls = 1;
    return f;
}

} // namespace

TEST_CASE("reads and writes copy, except /dev/null and /dev/zero") {
    CHECK(classify(OpFamily::read, "read", FdClass::file, FdClass::none, false).kind == Kind::copy_in);
    CHECK(classify(OpFamily::read, "read", FdClass::devzero, FdClass::none, false).kind == Kind::no_data);
    CHECK(classify(OpFamily::write, "write", FdClass::none, FdClass::socket, false).kind == Kind::copy_out);
    CHECK(classify(OpFamily::write, "write", FdClass::none, FdClass::devnull, false).kind == Kind::no_data);
    // An fd whose class is unknown still copies: only /dev/null and /dev/zero are exempt.
    CHECK(classify(OpFamily::read, "read", FdClass::unresolved, FdClass::none, false).kind == Kind::copy_in);
}

TEST_CASE("splice family: by reference, except into the page cache") {
    CHECK(classify(OpFamily::splice, "splice", FdClass::file, FdClass::pipe, false).kind == Kind::zero_copy);
    CHECK(classify(OpFamily::splice, "sendfile", FdClass::file, FdClass::socket, false).kind == Kind::zero_copy);
    CHECK(classify(OpFamily::splice, "splice", FdClass::pipe, FdClass::file, false).kind == Kind::kernel_copy);
    CHECK(classify(OpFamily::splice, "copy_file_range", FdClass::file, FdClass::file, false).kind == Kind::kernel_copy);
    CHECK(classify(OpFamily::splice, "splice", FdClass::pipe, FdClass::devnull, false).kind == Kind::no_data);
    CHECK(classify(OpFamily::vmsplice, "vmsplice", FdClass::none, FdClass::pipe, true).kind == Kind::zero_copy);
    CHECK(classify(OpFamily::vmsplice, "vmsplice", FdClass::pipe, FdClass::none, false).kind == Kind::copy_in);
}

TEST_CASE("io_uring opcodes map to families") {
    CHECK(op_info(SL_OP_URING | 22).name == "io_uring:read");
    CHECK(op_info(SL_OP_URING | 22).family == OpFamily::read);
    CHECK(op_info(SL_OP_URING | 30).family == OpFamily::splice);
    CHECK(op_info(SL_OP_URING | 30).swap_sides);
    CHECK(op_info(SL_OP_URING | 47).name == "io_uring:send_zc");
    CHECK(op_info(SL_OP_URING | 13).family == OpFamily::other); // accept moves no payload
    CHECK(op_info(SL_OP_SENDFILE).name == "sendfile");
    CHECK(op_info(SL_OP_RECVMMSG).family == OpFamily::read_mmsg);
}

TEST_CASE("dd | nc style pipeline: four copies per payload byte on the sender") {
    const uint64_t n = 1000;
    Stage dd = build_stage(1), nc = build_stage(2);
    add_flow(dd, flow("read", OpFamily::read, FdClass::file, FdClass::none, n));
    add_flow(dd, flow("write", OpFamily::write, FdClass::none, FdClass::pipe, n));
    add_flow(nc, flow("read", OpFamily::read, FdClass::pipe, FdClass::none, n));
    add_flow(nc, flow("write", OpFamily::write, FdClass::none, FdClass::socket, n));
    dd.cpu_ns = 1'000'000;
    Summary s = summarize({dd, nc});
    CHECK(s.payload_bytes == n); // the pipe between the stages is not payload twice
    CHECK(s.copies_per_byte == doctest::Approx(4.0));
    CHECK(s.cpu_s_per_gb == doctest::Approx(0.001 / (n / 1e9)));
}

TEST_CASE("sendfile sender and a splice receiver into /dev/null: no copies, payload counted once") {
    const uint64_t n = 4096;
    Stage tx = build_stage(1), rx = build_stage(2);
    add_flow(tx, flow("sendfile", OpFamily::splice, FdClass::file, FdClass::socket, n));
    add_flow(rx, flow("splice", OpFamily::splice, FdClass::socket, FdClass::pipe, n));
    add_flow(rx, flow("splice", OpFamily::splice, FdClass::pipe, FdClass::devnull, n));
    CHECK(tx.copied() == 0);
    CHECK(tx.zero_copy == n);
    CHECK(rx.no_data == n);
    // Each end traced on its own, as the bench does.
    CHECK(summarize({tx}).payload_bytes == n);
    Summary s = summarize({rx});
    CHECK(s.payload_bytes == n);
    CHECK(s.copies_per_byte == doctest::Approx(0.0));
    // Both ends in one trace: the socket between them is crossed twice; --payload fixes the figure.
    CHECK(summarize({tx, rx}).payload_bytes == 2 * n);
    CHECK(summarize({tx, rx}, n).payload_bytes == n);
}

TEST_CASE("flows with the same op and classes merge into one row") {
    Stage st = build_stage(1);
    add_flow(st, flow("read", OpFamily::read, FdClass::file, FdClass::none, 10));
    add_flow(st, flow("read", OpFamily::read, FdClass::file, FdClass::none, 5));
    REQUIRE(st.flows.size() == 1);
    CHECK(st.flows[0].bytes == 15);
    CHECK(st.flows[0].calls == 2);
    CHECK(st.by_class["file"].copied_read == 15);
}
