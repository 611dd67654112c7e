from __future__ import annotations

import pytest

from taskcal_agents.serving import DEFAULT_MODEL_NAME, connect
from taskcal_agents.serving import vllm as vllm_module


def test_connect_uses_the_given_server_without_starting_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("no server may be started when a base URL is given")

    monkeypatch.setattr(vllm_module.VLLMServer, "start", refuse)
    with connect("http://127.0.0.1:9/v1") as (url, model):
        assert (url, model) == ("http://127.0.0.1:9/v1", DEFAULT_MODEL_NAME)
    with connect("http://h:1/v1", "other") as found:
        assert found == ("http://h:1/v1", "other")


def test_connect_starts_and_stops_the_cpu_default(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    class FakeServer:
        def __init__(self, **kwargs: object) -> None:
            calls.append(f"init {sorted(kwargs)}")
            self.base_url, self.model_name = "http://127.0.0.1:1234/v1", DEFAULT_MODEL_NAME

        def __enter__(self) -> FakeServer:
            calls.append("start")
            return self

        def __exit__(self, *exc: object) -> None:
            calls.append("stop")

    monkeypatch.setattr(vllm_module, "VLLMServer", FakeServer)
    with connect(kv_cache_gib=2) as (url, model):
        assert (url, model) == ("http://127.0.0.1:1234/v1", DEFAULT_MODEL_NAME)
        assert calls == ["init ['kv_cache_gib']", "start"]
    assert calls[-1] == "stop"
