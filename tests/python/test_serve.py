"""sluice.serve / sluice.Server and sluice.get (issue 15): a server in this process, HTTP reads
with the token, get sessions over sluice's protocol, stats, refusals as the right exception."""
import hashlib
import json
import urllib.error
import urllib.request

import pytest

import sluice
from conftest import make_tree, tree_listing


def regular_files(listing):
    return {k: v for k, v in listing.items() if v[0] == "file"}


def test_serve_http_and_get(tmp_path):
    src = make_tree(tmp_path / "www")
    with sluice.serve(src, http_port=0, port=0, token="pytok", bind_address="127.0.0.1", threads=1) as srv:
        assert srv.port > 0 and srv.get_port > 0 and srv.get_port != srv.port
        body = urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/big.bin?token=pytok", timeout=60).read()
        assert body == (src / "big.bin").read_bytes()
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/big.bin", timeout=60)
        assert e.value.code == 401

        dest = tmp_path / "in"
        dest.mkdir()
        seen = []
        stats = sluice.get(f"sluice://127.0.0.1:{srv.get_port}/a?token=pytok", dest, streams=3,
                           progress=seen.append, progress_interval=0.05)
        assert stats["files"] == 20 and stats["streams"] == 3 and seen
        assert regular_files(tree_listing(dest / "a")) == regular_files(tree_listing(src / "a"))

        with pytest.raises(sluice.AuthError):
            sluice.get(f"sluice://127.0.0.1:{srv.get_port}/big.bin", dest, token="wrong")
        with pytest.raises(sluice.SourceError, match="not found"):
            sluice.get(f"sluice://127.0.0.1:{srv.get_port}/nope?token=pytok", dest)
        st = srv.stats()
        assert st["get_sessions"] == 3 and st["get_sessions_failed"] == 2 and st["requests"] == 2
    with pytest.raises(sluice.UsageError):
        sluice.Server(tmp_path / "www", http_port=70000)
    with pytest.raises(sluice.DestinationError):
        sluice.Server(tmp_path / "missing", token="x")
