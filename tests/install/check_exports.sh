#!/usr/bin/env bash
# Checks that a libsluice.so exports the public API and nothing else: every symbol in its
# dynamic table demangles into sluice::, each part of its qualified name is declared in the
# public headers, and none is an internal piece (the wire codec, rings, the file table...).
# Programs can only come to depend on what is exported, so anything else here is a leak that
# would tie them to the internals (lib/meson.build, lib/libsluice.map, sluice/export.hpp).
# And the other way: every function the headers declare without a body is marked SLUICE_EXPORT
# and exported, so a forgotten mark fails here, not in a program's link.
# usage: check_exports.sh LIBSLUICE_SO PUBLIC_HEADER_DIR   (the dir holding sluice.hpp)
set -euo pipefail
so=$1 hdrs=$2
fail() { echo "FAIL: $so: $*"; exit 1; }

# Internal names that must never be exported, even where a public header mentions them
# (Receiver::Impl is declared there but defined inside the library).
internal='sluice::(wire|journal|detail)::|::Impl(::|$)|(^|::)(Ring|FileTable|RecvFile|DestTree|ParentDirCache|Planner|WorkQueue|UniqueFd|Pipe|Xxh3)(::|$)'

declared=$(cat "$hdrs"/*.hpp)
syms=$(nm -D --defined-only "$so" | awk 'NF == 3 { print $3 }' | c++filt)
n=0
while IFS= read -r sym; do
  [[ -n "$sym" ]] || continue
  n=$((n + 1))
  # vtables and typeinfo are exported for the classes programs derive from or catch.
  name=${sym#typeinfo name for }
  name=${name#typeinfo for }
  name=${name#vtable for }
  [[ "$name" == sluice::* ]] || fail "exports '$sym', outside namespace sluice"
  qualified=${name%%(*}           # drop the parameter list
  qualified=${qualified%%\[abi:*} # and an ABI tag
  [[ ! "$qualified" =~ $internal ]] || fail "exports the internal '$sym'"
  IFS=: read -ra parts <<< "${qualified#sluice::}"
  for part in "${parts[@]}"; do
    part=${part#\~}
    [[ -z "$part" ]] && continue
    grep -qw -- "$part" <<< "$declared" || fail "exports '$sym', but '$part' is not declared in the public headers"
  done
done <<< "$syms"
(( n > 0 )) || fail "exports no symbol at all"
# Catching sluice::Error in a program relies on the library's typeinfo being visible.
grep -qx 'typeinfo for sluice::Error' <<< "$syms" || fail "does not export the typeinfo of sluice::Error"

# Declarations on one line ending in ");" (or ") const;"), not deleted, defaulted or pure.
decls=$(grep -hE '\)( const)?( noexcept)?;[[:space:]]*(//.*)?$' "$hdrs"/*.hpp | grep -vE '^[[:space:]]*(using|return|//)|=') || true
while IFS= read -r d; do
  [[ -n "$d" ]] || continue
  [[ "$d" == *SLUICE_EXPORT* ]] || fail "'${d#"${d%%[![:space:]]*}"}' is declared in the public headers without SLUICE_EXPORT"
  fn=$(sed -E 's/^[^(]*[^~A-Za-z0-9_](~?[A-Za-z_][A-Za-z0-9_]*)\(.*/\1/' <<< " $d")
  grep -qE "(^|::)$fn(\[abi:[a-z0-9]+\])?\(" <<< "$syms" || fail "'$fn' is declared in the public headers but not exported"
done <<< "$decls"
echo "$n"
