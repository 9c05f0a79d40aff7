"""Loaded first by every Python interpreter of a Python test under scripts/test-tsan (this
folder leads PYTHONPATH: scripts/tsan-python puts it there, and the tests' children inherit it).

An interpreter that loads the sanitized extension needs the TSan runtime in the process from its
start (loaded later, by the import, it fails: "cannot allocate memory in static TLS block"), so
it runs with the runtime (SLUICE_TSAN_RUNTIME) first in LD_PRELOAD. Nothing else may inherit the
runtime's preload: sh and bash crash at start with it (Debian 12's libtsan.so.2 under this
kernel), and sluice, the one other child sanitized, links the runtime itself. So:
- an interpreter started with the runtime first in LD_PRELOAD takes it out of its environment
  (the dynamic loader has read it already: only what children get changes), leaving what else
  was preloaded (a test's shim) for them;
- an interpreter started without it (a test's child, e.g. `python -c` importing sluice, maybe
  with a shim of its own in LD_PRELOAD) starts itself again, the same command line, with the
  runtime put first."""
import os
import sys

_runtime = os.environ.get("SLUICE_TSAN_RUNTIME")
if _runtime:
    _preload = os.environ.get("LD_PRELOAD", "").replace(":", " ").split()
    if _preload[:1] == [_runtime]:
        if len(_preload) > 1:
            os.environ["LD_PRELOAD"] = " ".join(_preload[1:])
        else:
            del os.environ["LD_PRELOAD"]
    else:
        os.execve(sys.executable, sys.orig_argv, dict(os.environ, LD_PRELOAD=" ".join([_runtime] + _preload)))
