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
