#!/usr/bin/env bash
# Installs the build into a staging directory and proves the installed artefacts work on
# their own: the shared library exports the public API only, the examples build from the
# installed headers and library through pkg-config and move a file; the man page documents
# every option `--help` lists.
# usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
check_exports=$(dirname "$0")/check_exports.sh
stage=$(mktemp -d /tmp/sluice-install.XXXXXX)
trap 'kill $rx 2>/dev/null || true; rm -rf "$stage"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

meson install -C "$build" --no-rebuild --destdir "$stage" --quiet
pc=$(find "$stage" -name sluice.pc | head -1)
[[ -n "$pc" ]] || fail "no sluice.pc installed"
hdr=$(find "$stage" -path '*/include/sluice/sluice.hpp' | head -1)
[[ -n "$hdr" ]] || fail "public header not installed"
libdir=$(dirname "$(find "$stage" -name 'libsluice.so*' | head -1)")
[[ -d "$libdir" ]] || fail "libsluice.so not installed"
[[ -n $(find "$stage" -name 'libsluice.a') ]] || fail "static libsluice.a not installed"
man=$(find "$stage" -name sluice.1 | head -1)
[[ -n "$man" ]] || fail "man page not installed"
echo "ok: installed library (shared and static), headers, sluice.pc, man page"

# The check itself first, on libraries that leak (so a check that stopped seeing symbols, or
# stopped telling internal from public, cannot pass unnoticed), then on the installed one.
leak() { # SOURCE EXPECTED_MESSAGE
  echo "$1" | c++ -x c++ -shared -fPIC -o "$stage/leak.so" - || fail "cannot build a leaking test library"
  ! out=$("$check_exports" "$stage/leak.so" "$(dirname "$hdr")") || fail "check_exports.sh accepts a library exporting: $1"
  [[ "$out" == *"$2"* ]] || fail "check_exports.sh refused '$1' for another reason: $out"
}
leak 'namespace sluice::wire { void encode_manifest() {} }' "exports the internal 'sluice::wire::encode_manifest()'"
leak 'namespace sluice { struct Ring { Ring(); }; Ring::Ring() {} }' "exports the internal 'sluice::Ring::Ring()'"
leak 'int helper() { return 0; }' "exports 'helper()', outside namespace sluice"
leak 'namespace sluice { void Planner() {} }' "exports the internal 'sluice::Planner()'"
leak 'namespace sluice { struct Error { virtual ~Error(); }; Error::~Error() {} }' "is declared in the public headers but not exported"
# A public function whose mark was forgotten.
mkdir "$stage/unmarked" && cp "$(dirname "$hdr")"/*.hpp "$stage/unmarked/"
sed -i 's/^SLUICE_EXPORT \(Endpoint parse_url\)/\1/' "$stage/unmarked/url.hpp"
! out=$("$check_exports" "$libdir/libsluice.so" "$stage/unmarked") || fail "check_exports.sh misses an unmarked declaration"
[[ "$out" == *"'Endpoint parse_url(std::string_view url);' is declared in the public headers without SLUICE_EXPORT"* ]] ||
  fail "check_exports.sh refused an unmarked declaration for another reason: $out"
n=$("$check_exports" "$libdir/libsluice.so" "$(dirname "$hdr")") || fail "$n"
echo "ok: libsluice.so exports $n symbols, all of them the public sluice:: API"

export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR=$stage
flags=$(pkg-config --cflags --libs sluice) || fail "pkg-config cannot resolve sluice"
for ex in send_tree receive_once count_sink; do
  c++ -std=c++20 -O1 -o "$stage/$ex" "$src/examples/$ex.cpp" $flags -pthread || fail "$ex does not build against the installed library"
done
echo "ok: examples build through pkg-config ($flags)"

export LD_LIBRARY_PATH=$libdir
mkdir -p "$stage/in" "$stage/out"
head -c 3000000 /dev/urandom > "$stage/out/payload.bin"
"$stage/receive_once" "$stage/in" > "$stage/rx.out" &
rx=$!
for _ in $(seq 100); do [[ -s "$stage/rx.out" ]] && break; sleep 0.05; done
url=$(head -1 "$stage/rx.out")
[[ "$url" == sluice://* ]] || fail "receive_once printed no URL"
timeout 60 "$stage/send_tree" "$url" "$stage/out/payload.bin" > "$stage/tx.out" || fail "send_tree failed"
wait $rx || fail "receive_once failed"
cmp "$stage/out/payload.bin" "$stage/in/payload.bin" || fail "received file differs"

# The callback-sink example counts what a sender sends it.
"$stage/count_sink" > "$stage/sink.out" &
rx=$!
for _ in $(seq 100); do [[ -s "$stage/sink.out" ]] && break; sleep 0.05; done
url=$(head -1 "$stage/sink.out")
[[ "$url" == sluice://* ]] || fail "count_sink printed no URL"
timeout 60 "$stage/send_tree" "$url" "$stage/out/payload.bin" > /dev/null || fail "send_tree to count_sink failed"
wait $rx || fail "count_sink failed"
grep -qx "payload.bin 3000000 bytes" "$stage/sink.out" || fail "count_sink did not count 3000000 bytes: $(cat "$stage/sink.out")"
echo "ok: count_sink received 3000000 bytes through its callback sink"
# Not piped into grep -q: under pipefail, an ldd killed by SIGPIPE would fail the check.
ldd "$stage/send_tree" > "$stage/ldd.txt"
grep -q "$libdir/libsluice.so" "$stage/ldd.txt" || fail "example not linked to the installed library"
echo "ok: the examples moved a file using the installed library"

sluice=$(find "$stage" -path '*/bin/sluice' | head -1)
for cmd in send recv serve get; do
  for opt in $("$sluice" "$cmd" --help | grep -oE '^ +--[a-z-]+' | tr -d ' '); do
    grep -q -- "$(echo "$opt" | sed 's/-/\\\\-/g')" "$man" || fail "sluice $cmd $opt is missing from the man page"
  done
done
n=$( { "$sluice" send --help; "$sluice" recv --help; "$sluice" serve --help; "$sluice" get --help; } | grep -cE "^ +--[a-z-]+")
(( n >= 40 )) || fail "found only $n options in --help"
echo "ok: the man page documents all $n options of sluice send, recv, serve and get --help"
echo "5 passed, 0 failed"
