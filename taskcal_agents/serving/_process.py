"""A vLLM OpenAI-compatible server as a managed subprocess.

:class:`VLLMServer` starts vLLM (the command from :mod:`._launch`), waits until it answers
(:mod:`._probe`), captures its log to a file, notices when it dies, and shuts it down cleanly
(``SIGTERM`` to its process group, then ``SIGKILL``).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from taskcal_agents._dtype import DtypeChoice, choose_dtype
from taskcal_agents._endpoint import REQUEST_TIMEOUT_S, Endpoint
from taskcal_agents._vllm_cpu import refuse_request_seed
from taskcal_agents.errors import ConfigurationError, ServerError, ServerStartupError
from taskcal_agents.models import ModelSpec, prepare_model
from taskcal_agents.serving._launch import (
    DEFAULT,
    DEFAULT_MAX_MODEL_LEN,
    Device,
    LaunchSpec,
    build_launch_spec,
    find_free_port,
    registry_spec,
)
from taskcal_agents.serving._probe import poll

if TYPE_CHECKING:
    from types import TracebackType

    from langchain_openai import ChatOpenAI


DEFAULT_STARTUP_TIMEOUT = 600.0
DEFAULT_STOP_TIMEOUT = 20.0


class VLLMServer:
    """A vLLM OpenAI-compatible server run as a child process (a context manager).

    Example::

        with VLLMServer() as server:            # the default model on the CPU
            model = server.chat_model(temperature=1.0)
            print(model.invoke("Hello").content)

        with VLLMServer(model="qwen2.5-coder-0.5b-instruct") as server:  # a registry model
            ...

    Args:
        model: A registry name (``taskcal model list``; prepared on first use with
            :func:`~taskcal_agents.models.prepare_model`), a model folder, or a hub id
            (anything with a ``/`` that is not an existing folder is passed to vLLM as it
            is); ``None`` means the embedded default model. A bare name is always looked up
            in the registry: write ``./NAME`` for a folder of that name.
        device: ``"cpu"`` (vLLM-CPU) or ``"gpu"`` (``vllm serve``).
        port: TCP port; ``None`` picks a free one.
        host: Interface to bind.
        served_model_name: Name clients use; defaults to the registry name for registry
            models (``smollm2-135m-instruct`` for the default), else the model argument.
        dtype: The weights' dtype: ``"auto"`` (default) chooses the one this CPU computes
            fast (float32 unless it has ``avx512_bf16`` or ``amx_bf16`` and a GEMM probe
            confirms bf16; ``$TASKCAL_DTYPE`` overrides; on a GPU, vLLM's default), or
            ``"bfloat16"``, ``"float32"``, ``"float16"``. A ``--dtype`` in *extra_args* is
            used as it is when *dtype* is ``"auto"``; both together are refused. See
            :func:`taskcal_agents.serving.choose_dtype`.
        extra_args: More command-line arguments for vLLM, appended last.
        env: More environment variables for the server.
        startup_timeout: Seconds to wait for ``/health`` and ``/v1/models``.
        python: Interpreter with vLLM installed (a separate server venv is fine); defaults to
            this one.
        seed: The server's ``--seed`` (the only seed used on the CPU path).
        max_model_len: ``--max-model-len``; defaults to the registry entry's (4096) for
            registry models and to 4096 otherwise; ``None`` keeps the model's own.
        kv_cache_gib: KV cache size on the CPU path, whole GiB.
        cpu_threads: OpenMP threads on the CPU path; ``None`` uses every CPU available.
        tool_call_parser: ``--tool-call-parser`` (with ``--enable-auto-tool-choice``);
            defaults to the registry entry's (``"hermes"`` for every registered model, whose
            chat templates render tools the Hermes way) and to no tool parsing for folders
            and hub ids; ``None`` disables it.
        chat_template: ``--chat-template`` file, if the model's own should be replaced.
        api_key: Require this key from clients (``--api-key``).
        log_path: File that receives the server's stdout and stderr; defaults to a new file
            in the temp directory.
        stop_timeout: Seconds between ``SIGTERM`` and ``SIGKILL`` at shutdown.

    Attributes:
        log_path: The server log (set once started).
        dtype_choice: The dtype served in and why (set by :meth:`launch_spec`).
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        device: Device = "cpu",
        port: int | None = None,
        host: str = "127.0.0.1",
        served_model_name: str | None = None,
        dtype: str = "auto",
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        python: str | None = None,
        seed: int = 0,
        max_model_len: int | None = DEFAULT,
        kv_cache_gib: int = 1,
        cpu_threads: int | None = None,
        tool_call_parser: str | None = DEFAULT,
        chat_template: str | Path | None = None,
        api_key: str | None = None,
        log_path: str | Path | None = None,
        stop_timeout: float = DEFAULT_STOP_TIMEOUT,
    ) -> None:
        if device not in ("cpu", "gpu"):
            msg = f"VLLMServer: device must be 'cpu' or 'gpu', got {device!r}."
            raise ConfigurationError(msg)
        if startup_timeout <= 0:
            msg = f"VLLMServer: startup_timeout must be > 0 seconds, got {startup_timeout!r}."
            raise ConfigurationError(msg)
        self.model = None if model is None else str(model)
        self.spec: ModelSpec | None = registry_spec(model)
        self.device: Device = device
        self.host = host
        self.port = port
        self.served_model_name = served_model_name
        self.extra_args = tuple(extra_args)
        self.env = dict(env or {})
        self.dtype = dtype
        # Refuses an unknown dtype, or one given twice, now rather than at start().
        choose_dtype(
            dtype,
            device=device,
            extra_args=self.extra_args,
            env={},
            flags=frozenset(),
            probe=False,
        )
        self.dtype_choice: DtypeChoice | None = None
        self.startup_timeout = float(startup_timeout)
        self.python = python or sys.executable
        self.seed = seed
        self.max_model_len = max_model_len
        self.kv_cache_gib = kv_cache_gib
        self.cpu_threads = cpu_threads
        self.tool_call_parser = tool_call_parser
        self.chat_template = None if chat_template is None else str(chat_template)
        self.api_key = api_key
        self.log_path: Path | None = None if log_path is None else Path(log_path)
        self.stop_timeout = float(stop_timeout)
        self._auto_port = port is None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_handle: Any = None
        self._resolved_model: str | None = None
        self._restarts = 0

    # -- state ---------------------------------------------------------------------------

    @property
    def model_name(self) -> str:
        """The name clients pass as ``model``."""
        if self.served_model_name is not None:
            return self.served_model_name
        if self.spec is not None:
            return self.spec.served_name
        return str(self.model)

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, ``http://HOST:PORT/v1``.

        Raises:
            RuntimeError: The server has not been started (no port chosen yet).
        """
        if self.port is None:
            msg = "VLLMServer.base_url: the server has no port yet; call start() first."
            raise RuntimeError(msg)
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    @property
    def root_url(self) -> str:
        """The server root (``base_url`` without ``/v1``), where ``/health`` lives."""
        return self.base_url.removesuffix("/v1")

    @property
    def pid(self) -> int | None:
        """The server's process id, when it was started here."""
        return None if self._process is None else self._process.pid

    @property
    def restarts(self) -> int:
        """How many times :meth:`ensure_alive` restarted the server."""
        return self._restarts

    def is_alive(self) -> bool:
        """Whether the server process is running (not whether it is healthy yet)."""
        return self._process is not None and self._process.poll() is None

    def launch_spec(self) -> LaunchSpec:
        """The command and environment :meth:`start` will use (prepares a registry model)."""
        if self.port is None:
            self.port = find_free_port(self.host)
        model = self._resolve_model()
        parser = self.tool_call_parser
        if parser is DEFAULT:
            parser = None if self.spec is None else self.spec.tool_call_parser
        max_model_len = self.max_model_len
        if max_model_len is DEFAULT:
            max_model_len = DEFAULT_MAX_MODEL_LEN if self.spec is None else self.spec.max_model_len
        if self.dtype_choice is None:
            self.dtype_choice = choose_dtype(
                self.dtype,
                device=self.device,
                extra_args=self.extra_args,
                python=self.python,
                env={**os.environ, **self.env},
            )
        return build_launch_spec(
            model=model,
            served_model_name=self.model_name,
            device=self.device,
            host=self.host,
            port=self.port,
            python=self.python,
            seed=self.seed,
            max_model_len=max_model_len,
            kv_cache_gib=self.kv_cache_gib,
            cpu_threads=self.cpu_threads,
            tool_call_parser=parser,
            chat_template=self.chat_template,
            api_key=self.api_key,
            dtype=None if self.dtype_choice.source == "extra_args" else self.dtype_choice.dtype,
            extra_args=self.extra_args,
        )

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> VLLMServer:
        """Start the server and wait until it answers.

        Returns:
            ``self``.

        Raises:
            RuntimeError: It is already running.
            ServerStartupError: It exited, or did not answer within ``startup_timeout``; the
                message ends with the tail of its log.
        """
        if self.is_alive():
            msg = f"VLLMServer.start: the server is already running (pid {self.pid})."
            raise RuntimeError(msg)
        spec = self.launch_spec()
        if self.log_path is None:
            log_dir = Path(tempfile.gettempdir()) / "taskcal-agents"
            log_dir.mkdir(parents=True, exist_ok=True)
            handle, name = tempfile.mkstemp(prefix=f"vllm-{self.port}-", suffix=".log", dir=log_dir)
            os.close(handle)
            self.log_path = Path(name)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_handle = self.log_path.open("ab")
        self._log_handle.write(f"# taskcal: dtype {self.dtype_choice}\n".encode())
        self._log_handle.write(f"$ {spec.shell()}\n".encode())
        self._log_handle.flush()
        try:
            self._process = subprocess.Popen(
                spec.argv,
                stdin=subprocess.DEVNULL,
                stdout=self._log_handle,
                stderr=subprocess.STDOUT,
                env=_merged_env(spec.env, self.env),
                start_new_session=True,
            )
        except OSError as exc:
            self._close_log()
            msg = f"VLLMServer.start: could not run {spec.argv[0]!r} ({exc}); is vLLM installed?"
            raise ServerStartupError(msg) from exc
        atexit.register(self.stop)
        try:
            self._wait_until_ready()
        except ServerStartupError:
            self.stop()
            if self._auto_port and "Address already in use" in self.log_tail(200):
                # Someone took the free port we picked before vLLM bound it: pick again, once.
                self._auto_port = False
                self.port = find_free_port(self.host)
                return self.start()
            raise
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the server: ``SIGTERM`` to its process group, ``SIGKILL`` after ``stop_timeout``.

        Safe to call more than once, and on a server that already died.
        """
        process, self._process = self._process, None
        atexit.unregister(self.stop)
        if process is not None:
            _terminate_group(process, self.stop_timeout)
        self._close_log()

    def restart(self) -> VLLMServer:
        """Stop the server (if running) and start it again on the same port."""
        self.stop()
        return self.start()

    def ensure_alive(self, *, restart: bool = False) -> None:
        """Check that the server process still runs; restart it or fail clearly if not.

        Args:
            restart: Start it again (same port) instead of raising.

        Raises:
            RuntimeError: It was never started.
            ServerError: It died and *restart* is false; the message ends with its log tail.
        """
        if self._process is None:
            msg = "VLLMServer.ensure_alive: the server was never started; call start() first."
            raise RuntimeError(msg)
        code = self._process.poll()
        if code is None:
            return
        if restart:
            self._restarts += 1
            self.restart()
            return
        msg = f"VLLMServer: the vLLM server (pid {self._process.pid}) died with exit code {code}."
        raise ServerError(msg, log_tail=self.log_tail())

    def log_tail(self, lines: int = 40) -> str:
        """The last *lines* lines of the server log ("" when there is none)."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        with self.log_path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 64 * 1024))
            text = handle.read().decode("utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> VLLMServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"running pid={self.pid}" if self.is_alive() else "stopped"
        where = f"port={self.port}" if self.port is not None else "no port"
        return f"VLLMServer(model={self.model_name!r}, device={self.device!r}, {where}, {state})"

    # -- clients -------------------------------------------------------------------------

    def chat_model(self, **kwargs: Any) -> ChatOpenAI:
        """A LangChain ``ChatOpenAI`` bound to this server.

        Args:
            **kwargs: Passed to ``ChatOpenAI`` (``temperature``, ``n``, ``max_tokens``, ...).

        Raises:
            ConfigurationError: ``seed`` was given on the CPU path.
        """
        from langchain_openai import ChatOpenAI

        self._refuse_request_seed(kwargs.get("seed"), "chat_model")
        params: dict[str, Any] = {
            "base_url": self.base_url,
            "model": self.model_name,
            "api_key": self.api_key or "EMPTY",
            "timeout": REQUEST_TIMEOUT_S,
        }
        return ChatOpenAI(**(params | kwargs))

    @property
    def endpoint(self) -> Endpoint:
        """Where this server answers, for a sampler (``OpenAISampler.from_endpoint``)."""
        return Endpoint(
            self.base_url,
            self.model_name,
            api_key=self.api_key or "EMPTY",
            allow_seed=self.device != "cpu",
            health_check=self.ensure_alive,
        )

    # -- internals -----------------------------------------------------------------------

    def _refuse_request_seed(self, seed: object, where: str) -> None:
        refuse_request_seed(seed, owner=f"VLLMServer.{where}", allowed=self.device != "cpu")

    def _resolve_model(self) -> str:
        if self._resolved_model is None:
            if self.spec is not None:
                self._resolved_model = str(prepare_model(self.spec, python=self.python))
            else:
                self._resolved_model = str(self.model)
        return self._resolved_model

    def _wait_until_ready(self) -> None:
        found = poll(
            self.base_url,
            self.model_name,
            timeout=self.startup_timeout,
            api_key=self.api_key,
            health=True,
            check=self._raise_if_exited,
        )
        if not found.ready:
            msg = (
                f"VLLMServer.start: the vLLM server did not answer on {self.root_url} "
                f"within startup_timeout={self.startup_timeout:g} s; raise "
                f"startup_timeout or read its log {str(self.log_path)!r}."
            )
            raise ServerStartupError(msg, log_tail=self.log_tail())

    def _raise_if_exited(self) -> None:
        if self._process is None or self._process.poll() is not None:
            code = None if self._process is None else self._process.returncode
            msg = (
                f"VLLMServer.start: the vLLM server exited with code {code} before it "
                f"was ready; its log is {str(self.log_path)!r}."
            )
            raise ServerStartupError(msg, log_tail=self.log_tail())

    def _close_log(self) -> None:
        if self._log_handle is not None:
            self._log_handle.close()
            self._log_handle = None


def _merged_env(ours: Mapping[str, str], theirs: Mapping[str, str]) -> dict[str, str]:
    """The server's environment: this process's, then ours, then the caller's *env*.

    A caller's ``LD_PRELOAD`` goes after our preloads, not instead of them.
    """
    env = {**os.environ, **ours, **theirs}
    if "LD_PRELOAD" in ours and theirs.get("LD_PRELOAD"):
        own = [p for p in ours["LD_PRELOAD"].split(":") if p]
        extra = [p for p in theirs["LD_PRELOAD"].split(":") if p and p not in own]
        env["LD_PRELOAD"] = ":".join([*own, *extra])
    return env


def _terminate_group(process: subprocess.Popen[bytes], timeout: float) -> None:
    if process.poll() is not None:
        _reap_group(process.pid)
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=timeout)
    _reap_group(process.pid)


def _reap_group(pgid: int) -> None:
    """Kill what is left of the group (vLLM's engine core may outlive the API server)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


__all__ = ["DEFAULT_STARTUP_TIMEOUT", "DEFAULT_STOP_TIMEOUT", "VLLMServer"]
