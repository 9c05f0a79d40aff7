"""The emulator tests' temporary trees: a passed test's are deleted (tests/tmp_cleanup.py), as in
tests/e2e and tests/python. Without this hook each run of the five wan tests left ~230 MB in /tmp
(their sources and received copies; measured 2026-11-27)."""
import os
import sys

sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tmp_cleanup import pytest_runtest_makereport, pytest_sessionfinish  # noqa: E402,F401 (hooks)
