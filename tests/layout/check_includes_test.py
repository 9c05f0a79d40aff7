"""The include-rule checker catches a crossing: a send/ file that includes recv/, and a tool
that includes a private lib/ header, each fail it; the real tree passes."""
import pathlib
import subprocess
import sys
import tempfile

checker, root = sys.argv[1], sys.argv[2]


def run(tree):
    return subprocess.run([sys.executable, checker, tree], capture_output=True, text=True)


real = run(root)
assert real.returncode == 0, real.stderr
for rel, text in [("lib/send/session/x.cpp", '#include "recv/store/file_table.hpp"\n'),
                  ("lib/core/wire/x.cpp", '#include "send/plan/planner.hpp"\n'),
                  ("tools/x.cpp", '#include "core/ring/ring.hpp"\n')]:
    with tempfile.TemporaryDirectory() as d:
        p = pathlib.Path(d) / rel
        p.parent.mkdir(parents=True)
        p.write_text(text)
        r = run(d)
        assert r.returncode == 1 and rel in r.stderr, (rel, r.returncode, r.stderr)
print("include rules: the tree passes and 3 crossings are caught")
