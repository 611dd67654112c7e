"""VLLMServer's process management, against a tiny fake server (no vLLM needed, seconds)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from taskcal_agents.errors import ServerError, ServerStartupError
from taskcal_agents.sampling import OpenAISampler
from taskcal_agents.serving import VLLMServer

pytestmark = pytest.mark.integration

FAKE_SERVER = r"""
import argparse, json, os, signal, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int)
parser.add_argument("--host")
parser.add_argument("--served-model-name")
args, _ = parser.parse_known_args()
mode = os.environ["FAKE_MODE"]
print("fake vllm starting in mode", mode, flush=True)
if mode == "exit":
    print("Traceback: boom", flush=True)
    sys.exit(3)
if mode == "busy-once" and not os.path.exists(os.environ["FAKE_STATE"]):
    open(os.environ["FAKE_STATE"], "w").close()
    print("OSError: [Errno 98] Address already in use", flush=True)
    sys.exit(1)
if mode == "hang":
    time.sleep(600)
if mode == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/health":
            body = b""
        elif self.path == "/v1/models":
            body = json.dumps({"data": [{"id": args.served_model_name}]}).encode()
        else:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


HTTPServer((args.host, args.port), Handler).serve_forever()
"""


@pytest.fixture
def fake_python(tmp_path: Path) -> str:
    script = tmp_path / "fake_server.py"
    script.write_text(FAKE_SERVER, encoding="utf-8")
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n', encoding="utf-8")
    wrapper.chmod(0o755)
    return str(wrapper)


def _server(fake_python: str, tmp_path: Path, mode: str, **kwargs: object) -> VLLMServer:
    return VLLMServer(
        tmp_path,
        python=fake_python,
        served_model_name="fake",
        env={"FAKE_MODE": mode},
        log_path=tmp_path / "server.log",
        dtype="float32",  # no GEMM probe through the fake interpreter
        **kwargs,  # type: ignore[arg-type]
    )


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _wait_dead(server: VLLMServer, timeout: float = 10.0) -> None:
    """Wait until the killed server has exited (on two busy cores that is not instant)."""
    deadline = time.monotonic() + timeout
    while server.is_alive():
        assert time.monotonic() < deadline, "the killed server is still running"
        time.sleep(0.05)


def test_start_stop_and_dead_server_detection(fake_python: str, tmp_path: Path) -> None:
    server = _server(fake_python, tmp_path, "serve", stop_timeout=5)
    with server:
        assert server.is_alive()
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        port, pid = server.port, server.pid
        assert pid is not None
        server.ensure_alive()  # no error while it runs

        os.killpg(pid, signal.SIGKILL)
        _wait_dead(server)
        with pytest.raises(ServerError, match=r"died with exit code -9\.\n--- server log") as info:
            server.ensure_alive()
        assert "fake vllm starting in mode serve" in info.value.log_tail

        server.ensure_alive(restart=True)
        assert server.is_alive()
        assert server.restarts == 1
        assert server.port == port
        assert server.pid != pid
        new_pid = server.pid
    assert not server.is_alive()
    assert new_pid is not None
    assert _gone(new_pid)
    log = (tmp_path / "server.log").read_text(encoding="utf-8")
    # The dtype and why, then the command line, head the log.
    assert log.startswith("# taskcal: dtype float32 (asked for)\n$ ")
    assert "-m vllm.entrypoints.openai.api_server" in log


def test_a_taken_port_is_replaced_once(fake_python: str, tmp_path: Path) -> None:
    server = _server(fake_python, tmp_path, "busy-once")
    server.env["FAKE_STATE"] = str(tmp_path / "state")
    with server:
        assert server.is_alive()
    log = (tmp_path / "server.log").read_text(encoding="utf-8")
    assert log.count("$ ") == 2
    assert "Address already in use" in log


def test_a_server_that_exits_fails_startup_with_its_log(fake_python: str, tmp_path: Path) -> None:
    server = _server(fake_python, tmp_path, "exit")
    with pytest.raises(ServerStartupError, match=r"exited with code 3 before it was ready") as info:
        server.start()
    assert "Traceback: boom" in info.value.log_tail
    assert not server.is_alive()


def test_a_server_that_never_answers_times_out_and_is_killed(
    fake_python: str, tmp_path: Path
) -> None:
    server = _server(fake_python, tmp_path, "hang", startup_timeout=2, stop_timeout=2)
    started = time.monotonic()
    with pytest.raises(
        ServerStartupError,
        match=r"did not answer on http://127\.0\.0\.1:\d+ within startup_timeout=2 s; raise "
        r"startup_timeout or read its log",
    ):
        server.start()
    assert time.monotonic() - started < 15
    assert not server.is_alive()


def test_sigterm_ignoring_server_is_killed(fake_python: str, tmp_path: Path) -> None:
    server = _server(fake_python, tmp_path, "stubborn", stop_timeout=1).start()
    pid = server.pid
    assert pid is not None
    server.stop()
    assert _gone(pid)


def test_sampler_reports_a_dead_server_with_its_log(fake_python: str, tmp_path: Path) -> None:
    with _server(fake_python, tmp_path, "serve") as server:
        sampler = OpenAISampler.from_endpoint(server.endpoint, timeout=5)
        assert server.pid is not None
        os.killpg(server.pid, signal.SIGKILL)
        _wait_dead(server)
        with pytest.raises(ServerError, match=r"died with exit code -9") as info:
            sampler.sample("hi")
        assert "fake vllm starting" in info.value.log_tail


def test_taskcal_serve_writes_its_url_and_stops_on_sigterm(
    fake_python: str, tmp_path: Path
) -> None:
    url_file = tmp_path / "url"
    command = [
        sys.executable,
        "-m",
        "taskcal_agents.cli",
        "serve",
        "--python",
        fake_python,
        "--model",
        str(tmp_path),
        "--served-model-name",
        "fake",
        "--url-file",
        str(url_file),
        "--log-file",
        str(tmp_path / "server.log"),
    ]
    cli = subprocess.Popen(
        command,
        env={**os.environ, "FAKE_MODE": "serve"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not url_file.exists() and time.monotonic() < deadline:
            assert cli.poll() is None, cli.stdout.read() if cli.stdout else ""
            time.sleep(0.2)
        url = url_file.read_text(encoding="utf-8").strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        cli.send_signal(signal.SIGTERM)
        output, _ = cli.communicate(timeout=30)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 0, output
    assert f"base_url: {url}" in output
    assert "stopping the server" in output
