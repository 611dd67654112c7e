"""The server is killed in the middle of ``taskcal sample`` (a fake server process, real HTTP).

Without a restart the run stops with failed items and says to rerun; with a supervisor
restarting the server on the same port (what ``taskcal serve --restart`` does for vLLM) the
items in flight fail and the rest go on. Either way the rerun completes the file, and no
item is lost or written twice. The vLLM-CPU version is
``tests/integration_tests/test_server_killed_live.py``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from importlib.resources import files
from pathlib import Path

import pytest
from typer.testing import CliRunner

from taskcal_agents.cli import app
from taskcal_agents.decision import _presets as tasks
from taskcal_agents.testing import start_process
from taskcal_agents.workflow import read_samples

DATA = Path(str(files("taskcal_agents") / "data" / "demo_tool_requests.jsonl"))


def _ids() -> list[str]:
    return [json.loads(line)["id"] for line in DATA.read_text().splitlines() if line.strip()]


def _sample(base_url: str, out: Path, task: Path) -> tuple[int, str]:
    args = ["sample", "--task", str(task), "--data", str(DATA), "--base-url", base_url]
    args += ["--model", "fake-model", "--n", "4", "--concurrency", "2", "--max-failures", "3"]
    args += ["--timeout", "5", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    return result.exit_code, result.output


def _check_complete(out: Path) -> None:
    lines = [json.loads(line) for line in out.read_text().splitlines()[1:]]  # after the header
    ids = [record["id"] for record in lines]
    assert sorted(read_samples(out).records) == sorted(ids)
    assert Counter(ids).most_common(1)[0][1] == 1  # nothing twice
    assert sorted(ids) == sorted(_ids())  # nothing lost


@pytest.mark.parametrize("restart", [False, True], ids=["no-restart", "restart"])
def test_server_killed_mid_sample_rerun_completes(
    loopback: None, tmp_path: Path, restart: bool
) -> None:
    task = tasks.tool_decision().to_file(tmp_path / "task.yaml")
    out = tmp_path / "samples.jsonl"
    process, base_url = start_process(latency=0.02, die_after=12)  # dies on request 13
    port = int(base_url.rsplit(":", 1)[1].split("/")[0])
    servers = [process]
    stop = threading.Event()

    def supervise() -> None:  # `taskcal serve --restart`: start it again on the same port
        while not stop.is_set():
            if servers[-1].poll() is not None:
                servers.append(start_process(port=port, latency=0.02)[0])
            stop.wait(0.05)

    watcher = threading.Thread(target=supervise, daemon=True)
    if restart:
        watcher.start()
    try:
        code, output = _sample(base_url, out, task)
        assert process.wait(timeout=10) == 1  # it was killed mid-run
        done = len(read_samples(out).records)
        if not restart:
            assert code == 1, output
            assert "Run the same command again to retry" in output
            assert 0 < done < len(_ids())
            servers.append(start_process(port=port, latency=0.02)[0])
        else:  # the supervisor has the server up again within moments
            deadline = time.monotonic() + 10
            while servers[-1] is process and time.monotonic() < deadline:
                time.sleep(0.05)
        code, output = _sample(base_url, out, task)
        assert code == 0, output
        _check_complete(out)
    finally:
        stop.set()
        if restart:
            watcher.join()
        for server in servers:
            server.kill()
            server.wait()
