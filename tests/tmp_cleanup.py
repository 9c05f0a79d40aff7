"""Temporary trees of passed tests are deleted; a failed test's are kept to be looked at.

pytest 7.2 (Debian 12, CI) keeps every test's trees until the next run of the same file and has no
retention policy. e2e-transfer left 5.2 GB in /tmp per build dir (its module-scoped 1.1 GB source
included), python-roundtrip 334 MB, and build dirs of removed worktrees filled the shared disk
(68 GB once). Imported by the conftests of tests/e2e and tests/python: pytest registers the hook
functions a conftest module holds, imported ones included."""
import shutil

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # A passed test's tmp_path, once its fixtures are torn down (its receivers have exited): frees
    # the disk during a long file instead of at its end.
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.sluice_call_passed = report.passed
    elif report.when == "teardown" and report.passed and getattr(item, "sluice_call_passed", False):
        tmp = getattr(item, "funcargs", {}).get("tmp_path")
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    # The whole base directory when every test passed: module- and session-scoped trees made with
    # tmp_path_factory (e2e-transfer's 1.1 GB source) are not any one test's tmp_path.
    factory = getattr(session.config, "_tmp_path_factory", None)
    if exitstatus == 0 and factory is not None:
        shutil.rmtree(factory.getbasetemp(), ignore_errors=True)
