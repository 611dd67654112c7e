"""Each script in examples/ runs against the live server and exits 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, server: Any, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASKCAL_VLLM_")}
    command = [
        sys.executable,
        str(EXAMPLES / name),
        "--base-url",
        server.base_url,
        "--model",
        server.model_name,
        "--limit",
        "1",
        *args,
    ]
    proc = subprocess.run(
        command, capture_output=True, text=True, timeout=300, env=env, cwd=EXAMPLES.parent
    )
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout}\n{proc.stderr}"
    print(proc.stdout)
    return proc.stdout


def test_agent_with_middleware(vllm_server: Any) -> None:
    out = run_example(
        "agent_with_middleware.py", vllm_server, "--n-samples", "3", "--max-tokens", "32"
    )
    assert "user: What's the weather in Paris right now?" in out
    assert "  decision: " in out


def test_langgraph_routing(vllm_server: Any) -> None:
    out = run_example("langgraph_routing.py", vllm_server, "--n-samples", "3", "--max-tokens", "32")
    assert "  decide -> " in out
    assert "ended: " in out or "paused: " in out


def test_answer_or_abstain_chain(vllm_server: Any) -> None:
    out = run_example(
        "answer_or_abstain_chain.py", vllm_server, "--n-samples", "3", "--max-tokens", "16"
    )
    assert "What is the capital of France?" in out
    assert "p(answer)=" in out


def test_rating_l1(vllm_server: Any) -> None:
    out = run_example("rating_l1.py", vllm_server, "--n-samples", "3")
    assert "MBR rating=" in out
