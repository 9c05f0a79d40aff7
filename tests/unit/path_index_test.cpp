// The file table's path index (recv/store/path_index.hpp): an open-addressing set whose erase
// shifts entries back; a wrong shift makes a path still held unfindable ("listed twice" then
// misses a duplicate) or leaves an erased one found.
#include <doctest/doctest.h>

#include <deque>
#include <random>
#include <set>
#include <string>

#include "recv/store/path_index.hpp"

using namespace sluice;

TEST_CASE("the path index finds what it holds and nothing else") {
    PathIndex idx;
    std::deque<std::string> store; // stable addresses, as the table's slabs
    for (int i = 0; i < 5000; ++i) store.push_back("d" + std::to_string(i % 37) + "/f" + std::to_string(i));
    for (const std::string& p : store) CHECK(idx.insert(&p));
    CHECK(idx.size() == store.size());
    const std::string again = store[123];
    CHECK_FALSE(idx.insert(&again)); // an equal path at another address
    CHECK(idx.size() == store.size());
    CHECK(idx.contains("d0/f0"));
    CHECK_FALSE(idx.contains("d0/f1"));
    CHECK_FALSE(idx.contains(""));
}

TEST_CASE("erasing keeps every other path findable, through growth and wrap-around") {
    // Random inserts and erases checked against std::set after every step: every probe run
    // that an erase cuts (including runs that wrap past the last slot) must stay intact.
    PathIndex idx;
    std::deque<std::string> store;
    std::set<std::string> held;
    std::mt19937_64 rng(17);
    for (int step = 0; step < 20000; ++step) {
        const std::string p = "p" + std::to_string(rng() % 3000);
        if (held.contains(p)) {
            idx.erase(p);
            held.erase(p);
            CHECK_FALSE(idx.contains(p));
        } else {
            store.push_back(p);
            CHECK(idx.insert(&store.back()));
            held.insert(p);
        }
        if (step % 997 == 0)
            for (int q = 0; q < 3000; ++q) {
                const std::string s = "p" + std::to_string(q);
                REQUIRE(idx.contains(s) == held.contains(s));
            }
    }
    CHECK(idx.size() == held.size());
    for (const std::string& p : held) CHECK(idx.contains(p));
    idx.erase("not there"); // nothing happens
    CHECK(idx.size() == held.size());
}
