"""The one pair of environment variables that names a running server."""

from __future__ import annotations

import pytest

from taskcal_agents._endpoint import BASE_URL_ENV, MODEL_ENV, server_from_env


def test_the_pair_is_the_clis(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (BASE_URL_ENV, MODEL_ENV) == ("TASKCAL_BASE_URL", "TASKCAL_MODEL")
    monkeypatch.delenv(BASE_URL_ENV, raising=False)
    monkeypatch.delenv(MODEL_ENV, raising=False)
    assert server_from_env() == (None, None)
    monkeypatch.setenv(BASE_URL_ENV, "http://h:1/v1")
    monkeypatch.setenv(MODEL_ENV, "m")
    assert server_from_env() == ("http://h:1/v1", "m")
    assert server_from_env("http://other:2/v1", "n") == ("http://other:2/v1", "n")
    assert server_from_env(None, "n") == ("http://h:1/v1", "n")
    monkeypatch.setenv(MODEL_ENV, "")
    assert server_from_env() == ("http://h:1/v1", None)
