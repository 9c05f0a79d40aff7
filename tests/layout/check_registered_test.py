"""Every test file is registered with meson: a test file that is not listed never runs in the
suite, and CI stays green over it (three tree tests went unrun for a session that way).
usage: check_registered_test.py SOURCE_ROOT"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
missing = []
for folder, pattern in (("tests/e2e", "test_*.py"), ("tests/python", "test_*.py"), ("tests/unit", "*_test.cpp"),
                        ("tests/api", "*_test.cpp"), ("tests/wan", "test_*.py")):
    d = root / folder
    listed = (d / "meson.build").read_text()
    for f in sorted(d.glob(pattern)):
        if not re.search(r"['/]" + re.escape(f.name) + "'", listed):
            missing.append(f"{folder}/{f.name}")
if missing:
    print("test files not registered in their folder's meson.build (they never run):")
    for m in missing:
        print("  " + m)
    sys.exit(1)
print("every test file is registered")
