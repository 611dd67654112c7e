from __future__ import annotations

import pytest

from taskcal_agents.models import DEFAULT_MODEL_NAME
from taskcal_agents.serving import _process as vllm_module
from taskcal_agents.serving import connect


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


@pytest.mark.parametrize(
    ("model", "served"),
    [(None, DEFAULT_MODEL_NAME), ("qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-0.5b-instruct")],
)
def test_connect_starts_and_stops_a_server_on_the_model(
    monkeypatch: pytest.MonkeyPatch, model: str | None, served: str
) -> None:
    calls: list[str] = []

    class FakeServer:
        def __init__(self, model: str | None = None, **kwargs: object) -> None:
            calls.append(f"init {model} {sorted(kwargs)}")
            self.base_url, self.model_name = "http://127.0.0.1:1234/v1", model or DEFAULT_MODEL_NAME

        def __enter__(self) -> FakeServer:
            calls.append("start")
            return self

        def __exit__(self, *exc: object) -> None:
            calls.append("stop")

    monkeypatch.setattr(vllm_module, "VLLMServer", FakeServer)
    with connect(model=model, kv_cache_gib=2) as (url, name):
        assert (url, name) == ("http://127.0.0.1:1234/v1", served)
        assert calls == [f"init {model} ['kv_cache_gib']", "start"]
    assert calls[-1] == "stop"
