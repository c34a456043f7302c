"""Credentials: only over https; token files re-read on expiry and after a 401."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from setpoint.apimachinery.clock import FakeClock
from setpoint.client import auth
from setpoint.client import config as cfg
from setpoint.client import kubeconfig as kc


async def test_no_credentials_over_plain_http(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("file")
    for config in (cfg.ClientConfig(server="http://x", token="t"),
                   cfg.ClientConfig(server="http://x", token_file=tmp_path / "token"),
                   cfg.ClientConfig(server="http://x", username="u", password="p")):
        assert await auth.Credentials(config).authorization() is None


async def test_inline_token() -> None:
    credentials = auth.Credentials(cfg.ClientConfig(server="https://x", token="abc"))
    assert await credentials.authorization() == "Bearer abc"


async def test_basic_auth() -> None:
    credentials = auth.Credentials(cfg.ClientConfig(server="https://x", username="u",
                                                    password="p:w"))
    expected = "Basic " + base64.b64encode(b"u:p:w").decode()
    assert await credentials.authorization() == expected


async def test_token_wins_over_basic() -> None:
    credentials = auth.Credentials(cfg.ClientConfig(server="https://x", token="t",
                                                    username="u", password="p"))
    assert await credentials.authorization() == "Bearer t"


async def test_nothing_to_send() -> None:
    assert await auth.Credentials(cfg.ClientConfig(server="https://x")).authorization() is None


async def test_token_file_is_reread_after_the_refresh_interval(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("one\n")
    clock = FakeClock()
    credentials = auth.Credentials(
        cfg.ClientConfig(server="https://x", token_file=token, token_refresh_interval=60),
        clock=clock)
    assert await credentials.authorization() == "Bearer one"
    token.write_text("two")
    clock.advance(59)
    assert await credentials.authorization() == "Bearer one"  # cached
    clock.advance(1)
    assert await credentials.authorization() == "Bearer two"


async def test_invalidate_forces_a_reread(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("one")
    credentials = auth.Credentials(cfg.ClientConfig(server="https://x", token_file=token),
                                   clock=FakeClock())
    assert await credentials.authorization() == "Bearer one"
    token.write_text("rotated")
    credentials.invalidate()
    assert await credentials.authorization() == "Bearer rotated"


async def test_token_file_wins_over_inline_token(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("from-file")
    credentials = auth.Credentials(cfg.ClientConfig(server="https://x", token="inline",
                                                    token_file=token))
    assert await credentials.authorization() == "Bearer from-file"


async def test_unreadable_token_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(kc.ConfigError, match="cannot read token file"):
        await auth.Credentials(cfg.ClientConfig(server="https://x",
                                                token_file=missing)).authorization()
    fallback = auth.Credentials(cfg.ClientConfig(server="https://x", token="inline",
                                                 token_file=missing))
    assert await fallback.authorization() == "Bearer inline"


async def test_a_failed_reread_keeps_the_last_good_token(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("good")
    clock = FakeClock()
    credentials = auth.Credentials(cfg.ClientConfig(server="https://x", token_file=token),
                                   clock=clock)
    assert await credentials.authorization() == "Bearer good"
    token.unlink()
    clock.advance(120)
    assert await credentials.authorization() == "Bearer good"
    token.write_text("")  # an empty file (mid-rotation) does not erase the token either
    credentials.invalidate()
    assert await credentials.authorization() == "Bearer good"
