"""The token from the SLUICE_TOKEN environment variable (kept out of argv, as on the CLI), and
error messages with text a terminal would act on escaped."""
import pytest
from conftest import Served, assert_same_tree, local_receiver

import sluice


def test_sluice_token_is_used_when_no_token_is_given(tree, dst, monkeypatch):
    monkeypatch.setenv("SLUICE_TOKEN", "from-the-environment")
    rx = local_receiver(dst)
    assert rx.url.endswith("?token=from-the-environment")
    served = Served(rx)
    bare = rx.url.split("?")[0]  # a URL without its token
    sluice.send([tree], bare)
    served.join()
    assert_same_tree(tree, dst / tree.name)


def test_a_token_given_in_the_call_wins_over_sluice_token(tree, dst, monkeypatch):
    monkeypatch.setenv("SLUICE_TOKEN", "stale")
    rx = local_receiver(dst, token="given")
    assert rx.url.endswith("?token=given")
    served = Served(rx)
    sluice.send([tree], rx.url)  # the URL's token, not the environment's
    served.join()
    assert_same_tree(tree, dst / tree.name)


def test_without_any_token_send_is_a_usage_error(tree, monkeypatch):
    monkeypatch.delenv("SLUICE_TOKEN", raising=False)
    with pytest.raises(sluice.UsageError, match="no token"):
        sluice.send([tree], "sluice://127.0.0.1:9/")


def test_exception_messages_carry_escaped_text(tree):
    with pytest.raises(sluice.UsageError) as e:
        sluice.send([tree], "sluice://user\x1b]0;title\x07@127.0.0.1:9/?token=x")
    msg = str(e.value)
    assert "\x1b" not in msg and "\x07" not in msg
    assert "\\x1b]0;title\\x07" in msg and "user info" in msg
