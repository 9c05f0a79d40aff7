#include <doctest/doctest.h>

#include "recv/session/resend_policy.hpp"

using namespace sluice;

TEST_CASE("a block is asked for again at most three times") {
    ResendPolicy p;
    for (int i = 0; i < ResendPolicy::kMaxResends; ++i) CHECK(p.may_resend(7, 4096));
    CHECK_FALSE(p.may_resend(7, 4096));
    CHECK(p.may_resend(7, 8192));
    CHECK(p.failures() == 5);
}

TEST_CASE("the blocks remembered as failed are bounded: a sender failing ever new ones is refused") {
    ResendPolicy p;
    for (uint64_t i = 0; i < ResendPolicy::kMaxFailedBlocks; ++i) REQUIRE(p.may_resend(0, i));
    CHECK(p.may_resend(0, 0)); // one already remembered may still be asked for again
    try {
        p.may_resend(0, ResendPolicy::kMaxFailedBlocks);
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::integrity);
        CHECK(std::string(e.what()).find("more than 65536 blocks failed their checksum") != std::string::npos);
    }
}
