#include <doctest/doctest.h>

#include "sluice/sluice.hpp"

using namespace sluice;

TEST_CASE("connection strings parse and format") {
    auto e = parse_url("sluice://10.0.0.2:7000/?token=abc123");
    CHECK(e.host == "10.0.0.2");
    CHECK(e.port == 7000);
    CHECK(e.token == "abc123");
    CHECK(format_url(e) == "sluice://10.0.0.2:7000/?token=abc123");

    auto v6 = parse_url("sluice://[::1]:9/?token=a%20b");
    CHECK(v6.host == "::1");
    CHECK(v6.token == "a b");
    CHECK(parse_url(format_url(v6)).token == "a b");
    CHECK(format_url(v6) == "sluice://[::1]:9/?token=a%20b");
}

TEST_CASE("bad connection strings name what is wrong") {
    CHECK_THROWS_WITH(parse_url("http://x:1/"), doctest::Contains("sluice://"));
    CHECK_THROWS_WITH(parse_url("sluice://host/"), doctest::Contains("missing :PORT"));
    CHECK_THROWS_WITH(parse_url("sluice://host:99999/"), doctest::Contains("port '99999'"));
    CHECK_THROWS_WITH(parse_url("sluice://host:1/?tok=x"), doctest::Contains("unknown parameter 'tok'"));
    CHECK_THROWS_WITH(parse_url("sluice://host:1/?token=%zz"), doctest::Contains("%-escape"));
    CHECK_THROWS_WITH(parse_url("sluice://host:1/?token=%2"), doctest::Contains("%-escape"));
}

TEST_CASE("sizes accept binary suffixes") {
    CHECK(parse_size("65536", "--x") == 65536);
    CHECK(parse_size("8M", "--x") == 8u << 20);
    CHECK(parse_size("8MiB", "--x") == 8u << 20);
    CHECK(parse_size("400m", "--x") == 400u << 20);
    CHECK(parse_size("1G", "--x") == 1u << 30);
    CHECK_THROWS_WITH(parse_size("fast", "--rate-limit"), doctest::Contains("--rate-limit: 'fast'"));
    CHECK_THROWS(parse_size("8Q", "--x"));
    CHECK_THROWS(parse_size("99999999999T", "--x"));
}

TEST_CASE("connection strings are parsed strictly: what is not understood is refused, naming the part") {
    // user@host was taken as the host name "user@host"
    CHECK_THROWS_WITH(parse_url("sluice://user@host:1/?token=t"), doctest::Contains("user info"));
    CHECK_THROWS_WITH(parse_url("sluice://user:pw@host:1/"), doctest::Contains("user info"));
    CHECK_THROWS_WITH(parse_host_port("root@10.0.0.1:9"), doctest::Contains("user info"));
    // #fragment was taken as part of the token
    CHECK_THROWS_WITH(parse_url("sluice://host:1/?token=abc#frag"), doctest::Contains("'#fragment'"));
    CHECK_THROWS_WITH(parse_url("sluice://host:1/#x"), doctest::Contains("'#fragment'"));
    CHECK(parse_url("sluice://host:1/?token=a%23b").token == "a#b");
    // other query parameters, repeated or empty tokens, paths
    CHECK_THROWS_WITH(parse_url("sluice://host:1/?token=a&streams=4"), doctest::Contains("unknown parameter 'streams'"));
    CHECK_THROWS_WITH(parse_url("sluice://host:1/?token=a&token=b"), doctest::Contains("token given twice"));
    CHECK_THROWS_WITH(parse_url("sluice://host:1/?token="), doctest::Contains("empty token"));
    CHECK_THROWS_WITH(parse_url("sluice://host:1/dir?token=a"), doctest::Contains("unexpected path"));
    // ports
    CHECK_THROWS_WITH(parse_url("sluice://host:0/"), doctest::Contains("port '0'"));
    CHECK_THROWS_WITH(parse_url("sluice://host:65536/"), doctest::Contains("port '65536'"));
    CHECK_THROWS_WITH(parse_url("sluice://host:+80/"), doctest::Contains("port '+80'"));
    CHECK_THROWS_WITH(parse_url("sluice://host:80x/"), doctest::Contains("port '80x'"));
    CHECK_THROWS_WITH(parse_url("sluice://host:/"), doctest::Contains("missing port"));
    CHECK_THROWS_WITH(parse_url("sluice://:80/"), doctest::Contains("missing host"));
    // hosts
    CHECK_THROWS_WITH(parse_url("sluice://::1:80/"), doctest::Contains("must be in brackets"));
    CHECK_THROWS_WITH(parse_url("sluice://[::1/"), doctest::Contains("unclosed '['"));
    CHECK_THROWS_WITH(parse_url("sluice://[::1]/"), doctest::Contains("missing :PORT"));
    CHECK_THROWS_WITH(parse_url("sluice://[::1]x:80/"), doctest::Contains("missing :PORT"));
    CHECK_THROWS_WITH(parse_url("sluice://[host]:80/"), doctest::Contains("not an IPv6 address"));
    CHECK_THROWS_WITH(parse_url("sluice://ho st:80/"), doctest::Contains("host 'ho st'"));
}

TEST_CASE("IPv6 literals, ports and tokens that are right keep working") {
    auto a = parse_url("sluice://[::1]:7000/?token=s3cret");
    CHECK(a.host == "::1");
    CHECK(a.port == 7000);
    CHECK(a.token == "s3cret");
    auto b = parse_url("sluice://[2001:db8::17]:65535");
    CHECK(b.host == "2001:db8::17");
    CHECK(b.port == 65535);
    CHECK(b.token.empty());
    auto z = parse_url("sluice://[fe80::1%25eth0]:9/");
    CHECK(z.host == "fe80::1%eth0");
    CHECK(parse_url(format_url(z)).host == "fe80::1%eth0");
    CHECK(parse_url("sluice://[::ffff:10.0.0.1]:9/").host == "::ffff:10.0.0.1");
    auto n = parse_url("sluice://rx-1.example.com:9?token=t");
    CHECK(n.host == "rx-1.example.com");
    CHECK(n.token == "t");
    CHECK(parse_url("sluice://h:9/").token.empty()); // the token may come from elsewhere
    CHECK(parse_host_port("[::1]:9").host == "::1");
}

TEST_CASE("an error about a connection string does not show its token") {
    try {
        parse_url("sluice://user@host:1/?token=topsecret");
        FAIL("accepted");
    } catch (const Error& e) {
        CHECK(std::string(e.what()).find("topsecret") == std::string::npos);
        CHECK(std::string(e.what()).find("token=...") != std::string::npos);
    }
}
