"""Sync and async written once: sans-IO protocols and their two thin drivers.

Logic that must exist sync and async (a sampler's request and its error translation, the
chat-model top-up loop, the one-pass belief) is written once as a generator that yields
requests and receives their responses; an exception raised by a request is thrown into the
generator at its ``yield``, so the protocol handles it where it asked. :func:`drive` answers
the requests with a blocking call, :func:`adrive` with an awaited one; the generator's return
value is the result. :func:`drive_rounds` and :func:`adrive_rounds` run the decision
protocol (:mod:`taskcal_agents.decision._protocol`) this way, waiting as it says before each
draw.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Generator
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from taskcal_agents.decision import Draw, Drawn

__all__ = ["adrive", "adrive_rounds", "drive", "drive_rounds"]

RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")
ResultT = TypeVar("ResultT")


class _Step:
    """Where a protocol stands: its pending request, or its result once it returned."""

    def __init__(self, protocol: Generator[Any, Any, Any]) -> None:
        self.protocol = protocol
        self.done = False
        self.result: Any = None
        self.request: Any = self._advance(protocol.send, None)

    def _advance(self, step: Callable[[Any], Any], value: Any) -> Any:
        try:
            return step(value)
        except StopIteration as stop:
            self.done, self.result = True, stop.value
            return None

    def settle(self, response: Any, error: Exception | None) -> None:
        """Answer the pending request: send its response, or throw its exception in."""
        if error is None:
            self.request = self._advance(self.protocol.send, response)
        else:
            self.request = self._advance(self.protocol.throw, error)


def _outcome(call: Callable[[Any], Any], request: Any) -> tuple[Any, Exception | None]:
    try:
        return call(request), None
    except Exception as exc:
        return None, exc


async def _aoutcome(
    call: Callable[[Any], Awaitable[Any]], request: Any
) -> tuple[Any, Exception | None]:
    try:
        return await call(request), None
    except Exception as exc:
        return None, exc


def drive(
    protocol: Generator[RequestT, ResponseT, ResultT], call: Callable[[RequestT], ResponseT]
) -> ResultT:
    """Run *protocol*, answering each request with ``call(request)``."""
    step = _Step(protocol)
    while not step.done:
        step.settle(*_outcome(call, step.request))
    result: ResultT = step.result
    return result


async def adrive(
    protocol: Generator[RequestT, ResponseT, ResultT],
    call: Callable[[RequestT], Awaitable[ResponseT]],
) -> ResultT:
    """Run *protocol*, answering each request with ``await call(request)``."""
    step = _Step(protocol)
    while not step.done:
        step.settle(*await _aoutcome(call, step.request))
    result: ResultT = step.result
    return result


def drive_rounds(
    protocol: Generator[Draw, Drawn, ResultT], draw: Callable[[Draw], Drawn]
) -> ResultT:
    """Run the decision protocol: sleep each draw's wait, then ``draw(request)``."""

    def call(request: Draw) -> Drawn:
        if request.wait > 0:
            time.sleep(request.wait)
        return draw(request)

    return drive(protocol, call)


async def adrive_rounds(
    protocol: Generator[Draw, Drawn, ResultT], draw: Callable[[Draw], Awaitable[Drawn]]
) -> ResultT:
    """Async :func:`drive_rounds`: ``await asyncio.sleep`` the wait, then ``await draw``."""

    async def call(request: Draw) -> Drawn:
        if request.wait > 0:
            await asyncio.sleep(request.wait)
        return await draw(request)

    return await adrive(protocol, call)
