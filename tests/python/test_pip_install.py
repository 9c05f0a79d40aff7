"""`pip install .` at the repository root builds the package with meson-python into a fresh
venv; the installed module imports and moves a file, and the wheel carries only the Python
package (no CLI, no libsluice.so, no headers)."""
import os
import shutil
import subprocess
import sys
import venv

ROOT = os.environ["SLUICE_SOURCE_ROOT"]
VENV = os.environ["SLUICE_VENV"]

ROUND_TRIP = r"""
import os, sys, threading, sluice
src, dst = sys.argv[1], sys.argv[2]
assert os.path.dirname(sluice.__file__).startswith(sys.prefix), sluice.__file__
rx = sluice.Receiver(dst, bind_address="127.0.0.1", advertise_host="127.0.0.1")
out = {}
t = threading.Thread(target=lambda: out.update(rx.wait()))
t.start()
sent = sluice.send([src], rx.url)
t.join()
assert out["bytes"] == sent["bytes"] == os.path.getsize(src), (out, sent)
print("ok", sluice.__file__)
"""


def test_pip_install_into_a_fresh_venv(tmp_path):
    shutil.rmtree(VENV, ignore_errors=True)
    venv.create(VENV, with_pip=True)
    vpy = os.path.join(VENV, "bin", "python")
    r = subprocess.run([vpy, "-m", "pip", "install", "--disable-pip-version-check", ROOT],
                       capture_output=True, text=True, timeout=1100)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]

    src = tmp_path / "payload.bin"
    src.write_bytes(os.urandom(3 << 20))
    dst = tmp_path / "dst"
    dst.mkdir()
    # Run from tmp_path so the source tree's python/ can't shadow the installed package.
    r = subprocess.run([vpy, "-c", ROUND_TRIP, str(src), str(dst)], capture_output=True,
                       text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (dst / "payload.bin").read_bytes() == src.read_bytes()

    installed = []
    for d, _, files in os.walk(VENV):
        installed += [os.path.relpath(os.path.join(d, f), VENV) for f in files]
    ours = [p for p in installed if "/sluice" in p or p.startswith("bin/sluice")]
    assert not [p for p in ours if p.startswith("bin/")], ours  # no CLI
    assert not [p for p in installed if "libsluice" in p or p.endswith("sluice.hpp")], ours
    assert any(p.endswith("sluice/__init__.py") for p in ours), ours
    assert any("sluice/_sluice." in p and p.endswith(".so") for p in ours), ours
