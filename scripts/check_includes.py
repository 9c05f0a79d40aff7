#!/usr/bin/env python3
"""Checks the include rule of the layout (docs/design.md, "Layout"): a file's folder says what
it may include.

  lib/include/sluice/  the public API: only other public headers
  lib/core/            core/ and the public headers
  lib/send/            send/, core/ and the public headers (never recv/)
  lib/recv/            recv/, core/ and the public headers (never send/)
  lib/serve/           serve/, core/ and the public headers (never send/ or recv/)
  tools/, examples/, python/src/   the public headers only (and their own folder's headers)

usage: check_includes.py SOURCE_ROOT [--stamp FILE]
Prints every include that breaks the rule, as FILE:LINE, and exits 1 if there is one. With
--stamp, writes FILE on success (the build's custom target)."""
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
LIB_FOLDERS = ("core/", "send/", "recv/", "serve/")

# folder prefix (relative to the source root) -> the lib/ folders its includes may name
RULES = [
    ("lib/include/sluice/", ()),
    ("lib/core/", ("core/",)),
    ("lib/send/", ("core/", "send/")),
    ("lib/recv/", ("core/", "recv/")),
    ("lib/serve/", ("core/", "serve/")),
    ("tools/", ()),
    ("examples/", ()),
    ("python/src/", ()),
]
SOURCES = (".c", ".cpp", ".h", ".hpp")


def allowed(rel: str, allow: tuple, target: str) -> bool:
    if target.startswith("sluice/"):
        return True
    if target.startswith(LIB_FOLDERS):
        return target.startswith(allow)
    # Anything else must be a header of the file's own folder tree (tools/trace's "model.hpp",
    # a generated skeleton), never a path into lib/ spelled another way.
    return not any(part in target for part in ("../", "lib/"))


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    stamp = sys.argv[sys.argv.index("--stamp") + 1] if "--stamp" in sys.argv else None
    broken = []
    for prefix, allow in RULES:
        for path in sorted((root / prefix).rglob("*")):
            if path.suffix not in SOURCES or not path.is_file():
                continue
            rel = path.relative_to(root).as_posix()
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                m = INCLUDE.match(line)
                if m and not allowed(rel, allow, m[1]):
                    broken.append(f'{rel}:{n}: includes "{m[1]}", which its folder may not')
    for b in broken:
        print(b, file=sys.stderr)
    if broken:
        print(f"{len(broken)} include(s) break the layout rule (docs/design.md, Layout)", file=sys.stderr)
        return 1
    if stamp:
        pathlib.Path(stamp).write_text("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
