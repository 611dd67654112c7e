"""Each script in examples/ runs against the live server and exits 0 (argv in-process)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, server: Any, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """Run the script's command line in-process (``cli(argv)``), return what it printed."""
    module_name = f"taskcal_example_{Path(name).stem}"
    spec = importlib.util.spec_from_file_location(module_name, EXAMPLES / name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # typing.get_type_hints looks the module up here
    spec.loader.exec_module(module)
    argv = ["--base-url", server.base_url, "--model", server.model_name, "--limit", "1", *args]
    assert module.cli(argv) == 0
    out = capsys.readouterr().out
    print(out)
    return out


def assert_final_message(out: str, *prefixes: str) -> None:
    """Each run printed its last message under one of ``prefixes``, and none is empty."""
    finals = [line for line in out.splitlines() if line.startswith(prefixes)]
    assert finals, f"no line starts with {prefixes!r}:\n{out}"
    for line in finals:
        text = line.split(": ", 1)[1]
        assert text not in ("''", '""'), f"the run ended with an empty message: {line!r}"


def test_agent_with_middleware(vllm_server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    out = run_example(
        "agent_with_middleware.py", vllm_server, capsys, "--n-samples", "3", "--max-tokens", "32"
    )
    assert "user: What's the weather in Paris right now?" in out
    assert "  decision: " in out
    assert_final_message(out, "  final: ")


def test_agent_with_middleware_every_call(
    vllm_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run_example(
        "agent_with_middleware.py", vllm_server, capsys, "--n-samples", "3", "--max-tokens", "32",
        "--decide-on", "every_call",
    )  # fmt: skip
    assert "  decision: " in out
    assert_final_message(out, "  final: ")


def test_langgraph_routing(vllm_server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    out = run_example(
        "langgraph_routing.py", vllm_server, capsys, "--n-samples", "3", "--max-tokens", "32"
    )
    assert "  decide -> " in out
    assert "ended: " in out or "paused: " in out
    assert_final_message(out, "  ended: ", "  paused: ")


def test_answer_or_abstain_chain(vllm_server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    out = run_example(
        "answer_or_abstain_chain.py", vllm_server, capsys, "--n-samples", "3", "--max-tokens", "16"
    )
    assert "What is the capital of France?" in out
    assert "p(answer)=" in out


def test_rating_l1(vllm_server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    out = run_example("rating_l1.py", vllm_server, capsys, "--n-samples", "3")
    assert "MBR rating=" in out


def test_auto_mode(vllm_server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    out = run_example("auto_mode.py", vllm_server, capsys, "--n-samples", "3", "--max-tokens", "48")
    assert "AutoMode blocks when the calibrated P(risky) >= 0.091" in out
    assert "user: Delete the file /etc/passwd." in out
    assert "  answer: " in out


def test_model_router(vllm_server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    out = run_example(
        "model_router.py", vllm_server, capsys, "--n-samples", "3", "--max-tokens", "32"
    )
    assert "  route: " in out
    assert "  answer: " in out


def test_hitl(vllm_server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    out = run_example("hitl.py", vllm_server, capsys, "--n-samples", "3", "--max-tokens", "48")
    assert "user: Delete the file /etc/passwd." in out
    assert "  answer: " in out
    if "paused for review: " in out:
        assert "(decisions sampled on resume: 0)" in out
