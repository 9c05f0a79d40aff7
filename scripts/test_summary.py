"""Counts test cases across meson's test log: doctest and pytest report their own case
counts; any other test counts as one case. A test meson saw fail is never counted as
passing, even if its runner's summary was lost (a crash)."""
import json
import re
import sys

passed = failed = skipped = 0
for line in open(sys.argv[1]):
    t = json.loads(line)
    out = (t.get("stdout") or "") + (t.get("stderr") or "")
    result = t.get("result", "")
    p = f = s = None
    m = re.search(r"test cases:\s*(\d+) \|\s*(\d+) passed \|\s*(\d+) failed \|\s*(\d+) skipped", out)
    if m:
        p, f, s = int(m[2]), int(m[3]), int(m[4])
    else:
        tail = [l for l in out.splitlines() if re.search(r"\d+ (passed|failed|skipped|error)", l) and " in " in l]
        if tail:
            counts = dict((k, int(v)) for v, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", tail[-1]))
            p, f, s = counts.get("passed", 0), counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0), counts.get("skipped", 0)
    if p is None:
        p, f, s = (1, 0, 0) if result == "OK" else (0, 0, 1) if result == "SKIP" else (0, 1, 0)
    if result not in ("OK", "SKIP", "EXPECTEDFAIL") and f == 0:
        f = 1
    passed, failed, skipped = passed + p, failed + f, skipped + s
print(f"{passed} passed, {failed} failed, {skipped} skipped")
