"""A fake OpenAI-compatible server on 127.0.0.1, with fixed latency and injected faults.

For tests and benchmarks that need real HTTP without a model: :class:`FakeOpenAIServer`
answers ``POST /v1/chat/completions`` with ``n`` choices, ``GET /v1/models`` and
``GET /health``, each after a fixed ``latency``. With ``capacity=c`` at most *c*
chat-completion requests are served at once (the latency and the reply) and the rest
wait in a queue, as on a GPU server at its batch limit; without it, every request is
served at once (unlimited parallelism). Only the standard library is used, so it
starts in milliseconds, in a thread (``with FakeOpenAIServer() as server``) or as a process
(``python -m taskcal_agents.testing --port 0 [--latency S] [--capacity C]``, which
prints its base URL and serves until killed; ``--die-after K`` makes the process exit
abruptly on request K + 1, as a crashed server would).

What a choice says is ``reply(request, index)``: an OpenAI assistant message dict. The
default, :func:`tool_call_reply`, calls the first offered tool (``tool_calls`` as vLLM's
tool parser returns them) and answers text when no tool is offered, which the task parsers
read as ``tool_call`` and ``direct_answer``.

Faults (:data:`FAULTS`) are queued per request with :meth:`FakeOpenAIServer.fail`, or set
for every request with ``fault=``:

- ``"500"``: HTTP 500 with an error body;
- ``"429"``: HTTP 429 with ``Retry-After: <retry_after>``;
- ``"truncated"``: HTTP 200 whose JSON body is cut in half;
- ``"stall"``: no answer for ``stall`` seconds (longer than any sane client timeout);
- ``"reset"``: the connection is reset (TCP RST) before any answer.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "FAULTS",
    "FakeOpenAIServer",
    "Reply",
    "main",
    "start_process",
    "text_reply",
    "tool_call_reply",
]

FAULTS = ("500", "429", "truncated", "stall", "reset")
"""The faults the server can inject."""

Reply = Callable[[dict[str, Any], int], dict[str, Any]]
"""``reply(request, index)``: the assistant message of choice *index*."""


def tool_call_reply(request: dict[str, Any], index: int) -> dict[str, Any]:
    """Call the first offered tool (arguments: its first string parameter = ``"Paris"``).

    With no tool offered (or ``tool_choice="none"``), or once the last message is a tool
    result, answer in text (so an agent loop ends).
    """
    tools = request.get("tools") or []
    messages = request.get("messages") or [{}]
    answered = isinstance(messages[-1], dict) and messages[-1].get("role") == "tool"
    if not tools or request.get("tool_choice") == "none" or answered:
        return {"role": "assistant", "content": "It is sunny in Paris."}
    function = tools[0].get("function", {})
    properties = function.get("parameters", {}).get("properties", {})
    arguments = {name: "Paris" for name, spec in properties.items() if spec.get("type") == "string"}
    call = {
        "id": f"call-{index}",
        "type": "function",
        "function": {"name": function.get("name", "tool"), "arguments": json.dumps(arguments)},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def text_reply(text: str) -> Reply:
    """A reply that always answers *text*."""

    def reply(request: dict[str, Any], index: int) -> dict[str, Any]:
        return {"role": "assistant", "content": text}

    return reply


class FakeOpenAIServer:
    """An OpenAI-compatible chat-completions server on ``127.0.0.1`` (a thread of its own).

    Args:
        model: The model name ``/v1/models`` lists.
        latency: Seconds every answer waits (the model's fixed "compute time").
        reply: The message of each choice (default :func:`tool_call_reply`).
        fault: A fault for every request (one of :data:`FAULTS`), or ``None``.
        retry_after: The ``Retry-After`` seconds of a ``"429"``.
        stall: Seconds a ``"stall"`` waits before closing without an answer.
        port: The port (0: a free one).
        die_after: Only as a process: exit abruptly on request ``die_after + 1``.
        capacity: At most this many chat-completion requests are served (latency, fault
            and reply) at once; more wait their turn (in no guaranteed order). ``None``:
            no limit. ``GET`` requests are never limited.

    Attributes:
        requests: How many chat-completion requests arrived (faulty ones included).
        payloads: The last 100 request bodies (bounded, so long benchmarks do not grow).
        in_flight: Chat-completion requests being served now (not those queued).
        max_in_flight: The most that were ever served at once (never above ``capacity``).
    """

    def __init__(
        self,
        *,
        model: str = "fake-model",
        latency: float = 0.0,
        reply: Reply = tool_call_reply,
        fault: str | None = None,
        retry_after: float = 1.0,
        stall: float = 30.0,
        port: int = 0,
        die_after: int | None = None,
        capacity: int | None = None,
    ) -> None:
        if fault is not None and fault not in FAULTS:
            msg = f"FakeOpenAIServer parameter 'fault' must be one of {FAULTS}, got {fault!r}."
            raise ValueError(msg)
        if capacity is not None and (
            isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1
        ):
            msg = (
                "FakeOpenAIServer parameter 'capacity' must be an integer >= 1 (requests "
                f"served at once) or None (no limit), got {capacity!r}."
            )
            raise ValueError(msg)
        self.model = model
        self.latency = latency
        self.reply = reply
        self.fault = fault
        self.retry_after = retry_after
        self.stall = stall
        self.port = port
        self.die_after = die_after
        self.capacity = capacity
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._slots = threading.Semaphore(capacity) if capacity is not None else None
        self.payloads: deque[dict[str, Any]] = deque(maxlen=100)
        self._faults: deque[str] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def fail(self, *faults: str) -> FakeOpenAIServer:
        """Inject *faults*, one per coming chat-completion request, in order."""
        unknown = [f for f in faults if f not in FAULTS]
        if unknown:
            msg = f"FakeOpenAIServer.fail: unknown faults {unknown!r}; known: {FAULTS}."
            raise ValueError(msg)
        with self._lock:
            self._faults.extend(faults)
        return self

    def start(self) -> FakeOpenAIServer:
        """Bind and serve in a daemon thread (returns once the port accepts connections)."""
        server = self

        class Handler(_Handler):
            fake = server

        self._stopping.clear()
        self._httpd = _Server(("127.0.0.1", self.port), Handler)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the port (stalled requests are released)."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        with self._lock:  # a dead server keeps no connection open (keep-alive included)
            for connection in list(self._connections):
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
            self._connections.clear()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return (
            f"FakeOpenAIServer(base_url={self.base_url!r}, latency={self.latency!r}, "
            f"capacity={self.capacity!r})"
        )

    # -- used by the handler -------------------------------------------------------------

    def _next_fault(self, payload: dict[str, Any]) -> str | None:
        with self._lock:
            self.requests += 1
            self.payloads.append(payload)
            if self.die_after is not None and self.requests > self.die_after:
                sys.stdout.flush()
                import os

                os._exit(1)  # a crash: no answer, no cleanup
            return self._faults.popleft() if self._faults else self.fault

    @contextlib.contextmanager
    def _serving(self) -> Iterator[None]:
        """Hold one of ``capacity`` slots (waiting for one) while a request is served."""
        if self._slots is not None:
            self._slots.acquire()
        try:
            with self._lock:
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                yield
            finally:
                with self._lock:
                    self.in_flight -= 1
        finally:
            if self._slots is not None:
                self._slots.release()

    def _completion(self, payload: dict[str, Any]) -> dict[str, Any]:
        n = int(payload.get("n") or 1)
        messages = [self.reply(payload, i) for i in range(n)]
        choices = [
            {
                "index": i,
                "message": message,
                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                "logprobs": None,
            }
            for i, message in enumerate(messages)
        ]
        return {
            "id": f"chatcmpl-fake-{self.requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": payload.get("model", self.model),
            "choices": choices,
            "usage": {"prompt_tokens": 10, "completion_tokens": 5 * n, "total_tokens": 10 + 5 * n},
        }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that hang up (timeouts, resets) are expected here: stay quiet."""


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAIServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        with self.fake._lock:
            self.fake._connections.add(self.connection)

    def finish(self) -> None:
        with self.fake._lock:
            self.fake._connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """No access log."""

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            model = self.fake.model
            self._json(200, {"object": "list", "data": [{"id": model, "object": "model"}]})
        elif self.path == "/health":
            self._send(200, b"", "text/plain")
        else:
            self._json(404, {"message": f"no route {self.path}"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._json(404, {"message": f"no route {self.path}"})
            return
        try:
            payload = json.loads(body)
        except ValueError:
            self._json(400, {"message": "the body is not JSON"})
            return
        fault = self.fake._next_fault(payload)
        with self.fake._serving():
            self._serve(payload, fault)

    def _serve(self, payload: dict[str, Any], fault: str | None) -> None:
        """Wait the latency, then answer (or fail as *fault* says)."""
        if self.fake.latency:
            self.fake._stopping.wait(self.fake.latency)
        if fault == "stall":
            self.fake._stopping.wait(self.fake.stall)
            self.close_connection = True
            return
        if fault == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        if fault == "500":
            self._json(500, {"message": "injected internal server error", "code": 500})
        elif fault == "429":
            retry = {"Retry-After": f"{self.fake.retry_after:g}"}
            self._json(429, {"message": "injected rate limit", "code": 429}, retry)
        elif fault == "truncated":
            data = json.dumps(self.fake._completion(payload)).encode()
            self._send(200, data[: len(data) // 2], "application/json")
        else:
            self._json(200, self.fake._completion(payload))

    def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json", headers)

    def _send(
        self, status: int, data: bytes, ctype: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


def start_process(
    *,
    port: int = 0,
    latency: float = 0.0,
    die_after: int | None = None,
    fault: str | None = None,
    capacity: int | None = None,
) -> tuple[subprocess.Popen[str], str]:
    """Start the server as a process of its own (to be killed like a real server).

    The keywords are :class:`FakeOpenAIServer`'s (``capacity``: requests served at once).

    Returns:
        The process (the caller kills and waits for it) and its base URL.
    """
    args = [
        sys.executable,
        "-m",
        "taskcal_agents.testing",
        "--port",
        str(port),
        "--latency",
        str(latency),
    ]
    if die_after is not None:
        args += ["--die-after", str(die_after)]
    if fault is not None:
        args += ["--fault", fault]
    if capacity is not None:
        args += ["--capacity", str(capacity)]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    process.stdout.close()  # the URL is all it prints
    if not line:
        process.kill()
        process.wait()
        msg = f"start_process: the fake server did not start (exit code {process.poll()})."
        raise RuntimeError(msg)
    return process, line


def main(argv: Iterable[str] | None = None) -> None:
    """Serve until killed; print the base URL (one line) once the port accepts connections."""
    parser = argparse.ArgumentParser(prog="python -m taskcal_agents.testing")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--model", default="fake-model")
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--fault", choices=FAULTS, default=None)
    parser.add_argument("--die-after", type=int, default=None)
    parser.add_argument(
        "--capacity", type=int, default=None, help="requests served at once (default: no limit)"
    )
    args = parser.parse_args(None if argv is None else list(argv))
    if args.capacity is not None and args.capacity < 1:
        parser.error(f"--capacity must be >= 1, got {args.capacity}")
    server = FakeOpenAIServer(
        model=args.model,
        latency=args.latency,
        fault=args.fault,
        port=args.port,
        die_after=args.die_after,
        capacity=args.capacity,
    ).start()
    print(server.base_url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
