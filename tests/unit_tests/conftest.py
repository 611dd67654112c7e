"""Unit tests run without network access (loopback unix sockets stay allowed for asyncio)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import pytest_socket


@pytest.fixture(autouse=True)
def _no_network() -> Iterator[None]:
    pytest_socket.disable_socket(allow_unix_socket=True)
    yield
    pytest_socket.enable_socket()
