// The HTTP pieces of `sluice serve` without a socket: request heads (limits and the status
// each refusal gets), targets (what may never reach the file system), ranges and validators.
#include <doctest/doctest.h>

#include <string>

#include "serve/http/listing.hpp"
#include "serve/http/request.hpp"
#include "serve/http/response.hpp"
#include "serve/http/target.hpp"

using namespace sluice::http;

namespace {

ParseOutcome parse(const std::string& s, Request& r) { return parse_request(s, r); }

} // namespace

TEST_CASE("a request head is parsed in place, with keep-alive by version and Connection") {
    Request r;
    std::string in = "GET /a%20b?x=1 HTTP/1.1\r\nHost: h\r\nRange: bytes=1-2\r\nConnection: close\r\n\r\nGET /next";
    auto p = parse(in, r);
    REQUIRE(p.result == ParseResult::complete);
    CHECK(r.method == Method::get);
    CHECK(r.target == "/a%20b?x=1");
    CHECK(r.range == "bytes=1-2");
    CHECK_FALSE(r.keep_alive);
    CHECK(in.substr(r.head_bytes) == "GET /next");
    CHECK(parse("GET / HTTP/1.0\r\n\r\n", r).result == ParseResult::complete);
    CHECK_FALSE(r.keep_alive);
    CHECK(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", r).result == ParseResult::complete);
    CHECK(r.keep_alive);
    CHECK(parse("GET / HTTP/1.1\r\nHost: h\r\n", r).result == ParseResult::need_more);
}

TEST_CASE("each malformed or oversized head gets the status a client expects") {
    Request r;
    CHECK(parse("GET / HTTP/1.1\r\n\r\n", r).status == 400); // no Host
    CHECK(parse("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", r).status == 400);
    CHECK(parse("GET / HTTP/1.1\r\nHost: a\r\nX : y\r\n\r\n", r).status == 400);
    CHECK(parse("GET / HTTP/1.1\r\nHost: a\r\n x\r\n\r\n", r).status == 400);
    CHECK(parse(std::string("GET /\0 HTTP/1.1\r\nHost: a\r\n\r\n", 29), r).status == 400);
    CHECK(parse("GET / HTTP/3.0\r\nHost: a\r\n\r\n", r).status == 505);
    CHECK(parse("GET /" + std::string(kMaxTargetBytes, 'a') + " HTTP/1.1\r\nHost: a\r\n\r\n", r).status == 414);
    CHECK(parse("GET /" + std::string(kMaxTargetBytes + 100, 'a'), r).status == 414); // before the line ends
    std::string many = "GET / HTTP/1.1\r\nHost: a\r\n";
    for (unsigned i = 0; i < kMaxHeaders; ++i) many += "X: y\r\n";
    CHECK(parse(many + "\r\n", r).status == 431);
    CHECK(parse("GET / HTTP/1.1\r\nHost: a\r\nX: " + std::string(kMaxHeadBytes, 'a'), r).status == 431);
    CHECK(parse("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1x\r\n\r\n", r).status == 400);
    REQUIRE(parse("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n", r).result == ParseResult::complete);
    CHECK(r.has_body);
    CHECK(r.method == Method::put);
    CHECK(r.has_length);
    CHECK(r.content_length == 3);
    CHECK(!r.expect_continue);
    REQUIRE(parse("POST /v HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\nExpect: 100-Continue\r\n\r\n", r).result ==
            ParseResult::complete);
    CHECK(r.method == Method::post);
    CHECK(r.has_length);
    CHECK(!r.has_body);
    CHECK(r.expect_continue);
    REQUIRE(parse("PUT / HTTP/1.1\r\nHost: a\r\nExpect: magic\r\nTransfer-Encoding: chunked\r\n\r\n", r).result ==
            ParseResult::complete);
    CHECK(r.expect_other);
    CHECK(r.chunked);
    CHECK(!r.has_length);
    // two different lengths: which one frames the body is ambiguous
    CHECK(parse("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", r).status == 400);
    CHECK(parse("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", r).result ==
          ParseResult::complete);
    CHECK(parse("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: \r\n\r\n", r).status == 400);
    CHECK(parse("DELETE / HTTP/1.1\r\nHost: a\r\n\r\n", r).result == ParseResult::complete);
    CHECK(r.method == Method::other_known);
}

TEST_CASE("targets: decoded, split, and never out of DIR") {
    Target t;
    REQUIRE(parse_target("/a/./b//c%20d/?token=x", t) == 0);
    CHECK(t.rel == "a/b/c d");
    CHECK(t.trailing_slash);
    CHECK(t.query == "token=x");
    REQUIRE(parse_target("/", t) == 0);
    CHECK(t.rel.empty());
    for (const char* bad : {"/..", "/a/../..", "/%2e%2e/x", "/a%2f..%2f..", "/x%00", "/%4", "/%zz", "x", "http://h/x"})
        CHECK_MESSAGE(parse_target(bad, t) == 400, bad);
    std::string v;
    CHECK(query_value("a=1&token=s%20e+c", "token", v));
    CHECK(v == "s e c");
    CHECK_FALSE(query_value("tokens=1", "token", v));
    CHECK(percent_encode_path("a b/<c>") == "a%20b/%3Cc%3E");
}

TEST_CASE("one byte range; several, other units or nonsense mean the whole file") {
    ByteRange r;
    CHECK(parse_range("bytes=0-9", 100, r) == RangeResult::ok);
    CHECK((r.first == 0 && r.last == 9));
    CHECK(parse_range("bytes=90-", 100, r) == RangeResult::ok);
    CHECK(r.last == 99);
    CHECK(parse_range("bytes=-10", 100, r) == RangeResult::ok);
    CHECK((r.first == 90 && r.last == 99));
    CHECK(parse_range("bytes=-1000", 100, r) == RangeResult::ok);
    CHECK(r.first == 0);
    CHECK(parse_range("bytes=50-5000", 100, r) == RangeResult::ok);
    CHECK(r.last == 99);
    CHECK(parse_range("bytes=100-", 100, r) == RangeResult::unsatisfiable);
    CHECK(parse_range("bytes=-0", 100, r) == RangeResult::unsatisfiable);
    CHECK(parse_range("bytes=0-1,5-6", 100, r) == RangeResult::none);
    CHECK(parse_range("bytes=9-1", 100, r) == RangeResult::none);
    CHECK(parse_range("items=0-1", 100, r) == RangeResult::none);
    CHECK(parse_range("bytes=99999999999999999999-", 100, r) == RangeResult::none);
}

TEST_CASE("validators and dates") {
    CHECK(etag_list_matches("\"a\", W/\"b\"", "\"b\""));
    CHECK(etag_list_matches("*", "\"x\""));
    CHECK_FALSE(etag_list_matches("\"a\"", "\"b\""));
    char d[32];
    format_date(784111777, d);
    CHECK(std::string(d) == "Sun, 06 Nov 1994 08:49:37 GMT");
    CHECK(parse_date(d) == 784111777);
    CHECK(parse_date("Sunday, 06-Nov-94 08:49:37 GMT") == -1);
}

TEST_CASE("names are escaped for HTML and JSON") {
    std::string h;
    append_html_escaped(h, "<a href='x'>&\"");
    CHECK(h == "&lt;a href=&#39;x&#39;&gt;&amp;&quot;");
    std::string j;
    append_json_string(j, std::string("a\"\\\n\xff", 5));
    CHECK(j == "\"a\\\"\\\\\\u000a\xef\xbf\xbd\"");
}
