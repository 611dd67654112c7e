"""Unit tests run without network access (loopback unix sockets stay allowed for asyncio).

A test that needs real HTTP to a local fake server asks for ``loopback`` (TCP to
``127.0.0.1`` only) or for ``fake_openai`` (a started
:class:`~taskcal_agents.testing.FakeOpenAIServer` on it).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import pytest_socket

from taskcal_agents.testing import FakeOpenAIServer


@pytest.fixture(autouse=True)
def _no_network() -> Iterator[None]:
    pytest_socket.disable_socket(allow_unix_socket=True)
    yield
    pytest_socket.enable_socket()


@pytest.fixture(autouse=True)
def _float32_serving(monkeypatch: pytest.MonkeyPatch) -> None:
    """Launch commands do not depend on this machine's CPU (no GEMM probe is run)."""
    monkeypatch.setenv("TASKCAL_DTYPE", "float32")


@pytest.fixture
def loopback(_no_network: None) -> None:
    """TCP connections to ``127.0.0.1`` allowed, every other host still refused."""
    pytest_socket.enable_socket()
    pytest_socket.socket_allow_hosts(["127.0.0.1"], allow_unix_socket=True)


@pytest.fixture
def fake_openai(loopback: None) -> Iterator[FakeOpenAIServer]:
    """A fake OpenAI-compatible server on 127.0.0.1 (no latency, no faults until asked)."""
    with FakeOpenAIServer() as server:
        yield server
