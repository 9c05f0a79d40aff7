#!/usr/bin/env bash
# Builds WDT (github.com/facebook/wdt) into PREFIX, reproducibly: pinned commits of WDT and of
# the folly source tree it compiles a few files of, Debian 12 packages for everything else.
#
#   bench/peers/wdt-build.sh PREFIX [MIRROR]
#
# MIRROR holds git directories (bare or not) with the pinned commits, as MIRROR/OWNER+NAME/repo:
# facebook+wdt, facebook+folly, fastfloat+fast_float, fmtlib+fmt; default /work/.mirror. Result: PREFIX/bin/wdt (rpath to PREFIX/lib).
# Idempotent: a stamp with the commits makes a second run a no-op.
#
# Why these pins: WDT's newest commit (b3e21d7, 2026-06-09) is built against folly of the same
# day (9d27a0e, 2026-06-10): folly changes its headers often and WDT follows it. That folly needs
# C++20 (WDT's CMakeLists says 17), fmt and fast_float; the copy of WDT's CMakeLists is patched
# for that below, nothing else of WDT is changed.
set -euo pipefail
prefix=${1:?usage: wdt-build.sh PREFIX [MIRROR]}
mirror=${2:-/work/.mirror}
wdt_git=$mirror/facebook+wdt/repo
folly_git=$mirror/facebook+folly/repo
ff_git=$mirror/fastfloat+fast_float/repo
fmt_git=$mirror/fmtlib+fmt/repo
WDT_COMMIT=b3e21d71b2223fcecba58436f81a0ba7a56a6d6a
FOLLY_COMMIT=9d27a0ec8614064bdb46ca61a6f45439776b5877
# The versions that folly's own build manifests (build/fbcode_builder/manifests) name; Debian
# 12's fast_float 3.9 and fmt 9.1 are too old for this folly. Both are used header-only.
FAST_FLOAT_COMMIT=77cc847c842c49e7e3477c1e95da2b6540166d66 # v8.0.0
FMT_COMMIT=407c905e45ad75fc29bf0f9bb7c5c2fd3475976f # 12.1.0
FOLLY_EXTRA_SRC="folly/lang/SafeAssert.cpp folly/lang/Exception.cpp folly/detail/TrapOnAvx512.cpp folly/external/fast-crc32/sse_crc32c_v8s3x3.cpp folly/memory/Malloc.cpp"
stamp="$prefix/.wdt-build-stamp"
want="wdt=$WDT_COMMIT folly=$FOLLY_COMMIT fast_float=$FAST_FLOAT_COMMIT fmt=$FMT_COMMIT"
if [[ -x $prefix/bin/wdt && -f $stamp && $(cat "$stamp") == "$want" ]]; then
  echo "wdt-build: $prefix/bin/wdt is already built ($want)"
  exit 0
fi

pkgs=(cmake g++ make libgoogle-glog-dev libgflags-dev libboost-system-dev libboost-filesystem-dev
  libdouble-conversion-dev libssl-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "wdt-build: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

src=$(mktemp -d "${TMPDIR:-/tmp}/wdt-build.XXXXXX")
trap 'rm -rf "$src"' EXIT
# WDT's CMakeLists expects the folly tree beside it and the sources under a directory named wdt
# (it includes <wdt/...> with the parent directory on the include path).
mkdir -p "$src/wdt" "$src/folly" "$src/build" "$src/fast_float" "$src/fmt"
git --git-dir="$ff_git" archive "$FAST_FLOAT_COMMIT" include | tar -x -C "$src/fast_float"
git --git-dir="$fmt_git" archive "$FMT_COMMIT" include src | tar -x -C "$src/fmt"
git --git-dir="$wdt_git" archive "$WDT_COMMIT" | tar -x -C "$src/wdt"
# Without folly's tests: not built here, and the mirror lacks one of their binary blobs.
export GIT_INDEX_FILE="$src/folly.index"
git --git-dir="$folly_git" read-tree "$FOLLY_COMMIT"
git --git-dir="$folly_git" ls-files -z -- folly | grep -zv '/test/' |
  xargs -0 git --git-dir="$folly_git" --work-tree="$src/folly" checkout-index --prefix="$src/folly/" --
unset GIT_INDEX_FILE

# C++20 for today's folly; keep WDT's own flags (SSE 4.2 + PCLMUL for its CRC32C).
sed -i -e 's/set(CMAKE_CXX_STANDARD 17)/set(CMAKE_CXX_STANDARD 20)/' \
  -e "s|set(CMAKE_CXX_FLAGS \"-msse4.2 -mpclmul\")|set(CMAKE_CXX_FLAGS \"-msse4.2 -mpclmul -O2 -w -DFMT_HEADER_ONLY -I$src/fast_float/include -I$src/fmt/include\")|" \
  "$src/wdt/CMakeLists.txt"
# folly's source list as of this folly: SplitStringSimd became header-only; the functions WDT's
# folly headers now call out of line live in the files added here.
extra=""
for f in $FOLLY_EXTRA_SRC; do extra+="  \"\${FOLLY_SOURCE_DIR}/$f\"\n"; done
sed -i -e '/folly\/detail\/SplitStringSimd.cpp/d' \
  -e "s|^  \"\${FOLLY_SOURCE_DIR}/folly/ScopeGuard.cpp\"|&\n$extra|" "$src/wdt/CMakeLists.txt"

cmake -S "$src/wdt" -B "$src/build" -DCMAKE_INSTALL_PREFIX="$prefix" -DFOLLY_SOURCE_DIR="$src/folly" \
  -DBUILD_TESTING=off >"$src/cmake.log" 2>&1 || {
  tail -40 "$src/cmake.log" >&2
  exit 1
}
make -C "$src/build" -j"$(nproc)" wdtbin >"$src/make.log" 2>&1 || {
  mkdir -p "$prefix" && cp "$src/make.log" "$prefix/make-failed.log"
  grep -m 20 -B2 -A8 -e 'error' -e 'undefined reference' "$src/make.log" >&2 || tail -40 "$src/make.log" >&2
  echo "wdt-build: failed; the whole log is $prefix/make-failed.log" >&2
  exit 1
}
make -C "$src/build" install >/dev/null
echo "$want" >"$stamp"
"$prefix/bin/wdt" --version 2>/dev/null || true
echo "wdt-build: built $prefix/bin/wdt ($want)"
