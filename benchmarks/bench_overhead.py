"""Per-decision overhead of taskcal-agents next to the model's own sampling time.

Overhead = everything except the model: parse N samples (g_T) + belief + calibrate +
MBR + building the Decision, timed on ``Decider.decide`` (validated once, as the
Runnable does). The model time is one ``n=N`` request to the CPU vLLM server, and the
decision wall time is ``TaskCalibratedRunnable.invoke`` end to end.

Targets: overhead <= 1 ms p50 and <= 1 % of the decision's wall time.

Usage::

    .venv/bin/python benchmarks/bench_overhead.py --base-url URL --model NAME
    .venv/bin/python benchmarks/bench_overhead.py --start-server
    .venv/bin/python benchmarks/bench_overhead.py --no-live    # overhead only

The server is taken from ``--base-url``, else ``$TASKCAL_BASE_URL`` (and the model from
``--model`` / ``$TASKCAL_MODEL``); ``--start-server`` starts one with
``taskcal_agents.serving.VLLMServer`` on the default model. Without any, only the
overhead is measured.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from taskcal_agents import TaskCalibratedRunnable
from taskcal_agents.decision import _presets as tasks
from taskcal_agents.decision._belief import DEFAULT_ALPHA
from taskcal_agents.decision._decider import Decider, mbr_action
from taskcal_agents.parsing import GroundingContext
from taskcal_agents.sampling import sample_messages
from taskcal_agents.serving import server_from_env

PROMPTS = [
    "What's the weather in Paris?",
    "What's the weather?",
    "Book me a flight to Rome.",
]


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"sunny in {city}"


REQUEST = "What's the weather in Paris?"
"""The request the synthetic samples answer (their calls are grounded in it)."""


def synthetic_samples(n: int, seed: int = 0) -> list[AIMessage]:
    """A messy mix like SmolLM2's: hermes tool calls, questions, refusals, noise."""
    pool = [
        AIMessage(content='<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
                  "</tool_call>"),
        AIMessage(content="", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"},
                                           "id": "call_1"}]),
        AIMessage(content="Which city would you like the weather for?"),
        AIMessage(content="I'm sorry, but I can't access real-time weather data."),
        AIMessage(content="The weather in Paris is usually mild in spring, with some rain. " * 3),
        AIMessage(content="https://example.invalid/weather\n\nTry a weather website."),
    ]  # fmt: skip
    rng = np.random.default_rng(seed)
    return [pool[i] for i in rng.integers(0, len(pool), size=n)]


def fitted_calibrator(k: int) -> tuple[Any, str]:
    try:
        import calibrators
    except ImportError:
        return None, "none (calibrators not importable)"
    rng = np.random.default_rng(0)
    counts = rng.multinomial(16, rng.dirichlet(np.ones(k), size=500))
    P = (counts + DEFAULT_ALPHA) / (counts.sum(axis=1, keepdims=True) + k * DEFAULT_ALPHA)
    y = np.array([rng.choice(k, p=p) for p in P])
    cal = calibrators.make_calibrator("dirichlet").fit(P, y)
    return cal, f"{type(cal).__name__} (fitted, k={k})"


def timed(fn: Callable[[], Any], repeats: int, warmup: int = 50) -> list[float]:
    """Wall time of ``fn`` in microseconds, ``repeats`` times."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        fn()
        out.append((time.perf_counter_ns() - t0) / 1e3)
    return out


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def overhead_rows(
    decider: Decider, samples: list[AIMessage], repeats: int
) -> list[tuple[str, list[float]]]:
    task = decider.task
    labels = [task.parse_completion(m) for m in samples]
    belief = task.belief_from_labels(labels, alpha=decider.alpha)
    x = decider.calibrator_input(belief)
    q = decider.calibrate(x)
    cost = task.cost_matrix()
    conversation = [{"role": "user", "content": REQUEST}]
    context = GroundingContext([get_weather], conversation)
    return [
        ("parse (g_T) x N", timed(lambda: [task.parse_completion(m) for m in samples], repeats)),
        (
            "grounding context",
            timed(lambda: GroundingContext([get_weather], conversation), repeats),
        ),
        ("ground calls x N", timed(lambda: context.ground_samples(samples), repeats)),
        ("belief", timed(lambda: task.belief_from_labels(labels, alpha=decider.alpha), repeats)),
        ("calibrate", timed(lambda: decider.calibrate(x), repeats)),
        ("MBR", timed(lambda: mbr_action(q, cost), repeats)),
        (
            "total: Decider.decide",
            timed(lambda: decider.decide(samples, context=context), repeats),
        ),
    ]


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join("-" * w for w in widths)
    print(f"\n{title}")
    print("  ".join(str(h).ljust(w) for h, w in zip(header, widths, strict=True)))
    print(line)
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))


@contextlib.contextmanager
def server_url(args: argparse.Namespace) -> Iterator[tuple[str, str] | None]:
    if args.no_live:
        yield None
        return
    if args.start_server:
        from taskcal_agents.serving import VLLMServer

        with VLLMServer() as server:
            yield server.base_url, server.model_name
        return
    url, model = server_from_env(args.base_url, args.model)
    yield (url, model or "smollm2-135m-instruct") if url else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16, help="samples per decision (N)")
    parser.add_argument("--repeats", type=int, default=2000, help="overhead repetitions")
    parser.add_argument("--live-repeats", type=int, default=3, help="live decisions per prompt")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--base-url")
    parser.add_argument("--model")
    parser.add_argument("--start-server", action="store_true")
    parser.add_argument("--no-live", action="store_true")
    args = parser.parse_args(argv)

    task = tasks.tool_decision()
    calibrator, cal_name = fitted_calibrator(len(task.labels))
    decider = Decider(task, calibrator)
    print(f"task={task.name} labels={task.labels} N={args.n} calibrator={cal_name}")

    sample_sets = {"synthetic": synthetic_samples(args.n)}
    live_rows: list[list[str]] = []
    decision_walls: list[float] = []
    with server_url(args) as live:
        if live is not None:
            url, model_name = live
            from langchain_openai import ChatOpenAI

            chat = ChatOpenAI(base_url=url, model=model_name, api_key="EMPTY",  # type: ignore[arg-type]
                              max_tokens=args.max_tokens, timeout=600)  # fmt: skip
            model = chat.bind_tools([get_weather])
            runnable = TaskCalibratedRunnable(model, task, calibrator, n_samples=args.n)
            sampling_walls: list[float] = []
            for prompt in PROMPTS:
                for _ in range(args.live_repeats):
                    t0 = time.perf_counter()
                    samples = sample_messages(model, prompt, n=args.n, temperature=1.0)
                    sampling_walls.append(time.perf_counter() - t0)
                    sample_sets.setdefault(f"live: {prompt}", samples)
                    t0 = time.perf_counter()
                    runnable.invoke(prompt)
                    decision_walls.append(time.perf_counter() - t0)
            live_rows = [
                ["model sampling (1 request, n=N)", f"{statistics.median(sampling_walls):.2f} s",
                 f"{max(sampling_walls):.2f} s", str(len(sampling_walls))],
                ["decision wall (Runnable.invoke)", f"{statistics.median(decision_walls):.2f} s",
                 f"{max(decision_walls):.2f} s", str(len(decision_walls))],
            ]  # fmt: skip
        else:
            print("no live server: reporting overhead only")

    totals: list[float] = []
    for name, samples in sample_sets.items():
        rows = overhead_rows(decider, samples, args.repeats)
        totals += rows[-1][1]
        print_table(
            f"overhead per decision, {name} (N={args.n}, {args.repeats} repeats)",
            ["step", "p50 (µs)", "p99 (µs)"],
            [[step, f"{pct(v, 50):.1f}", f"{pct(v, 99):.1f}"] for step, v in rows],
        )
    p50, p99 = pct(totals, 50), pct(totals, 99)
    summary = [["overhead (parse+belief+calibrate+MBR)", f"{p50 / 1e3:.3f} ms",
                f"{p99 / 1e3:.3f} ms", str(len(totals))]]  # fmt: skip
    summary += live_rows
    print_table("summary", ["what", "p50", "p99 / max", "count"], summary)
    ok_abs = p50 <= 1000.0
    print(f"\ntarget overhead p50 <= 1 ms: {'PASS' if ok_abs else 'FAIL'} ({p50 / 1e3:.3f} ms)")
    ok_rel = True
    if decision_walls:
        share = p50 / 1e6 / statistics.median(decision_walls) * 100
        ok_rel = share <= 1.0
        print(f"target overhead <= 1% of decision wall time: {'PASS' if ok_rel else 'FAIL'} "
              f"({share:.4f} %)")  # fmt: skip
    return 0 if ok_abs and ok_rel else 1


if __name__ == "__main__":
    sys.exit(main())
