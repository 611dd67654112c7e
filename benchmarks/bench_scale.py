"""Throughput of `taskcal sample`'s engines: local (thread pool) vs Ray (HTTP actors).

Fake OpenAI-compatible endpoints answer every request after a fixed latency (the model's
compute time). Each item costs two requests (N samples, greedy). Rows:

* local vs Ray on one endpoint at equal concurrency (threads vs actors);
* Ray on 1, 2 and 4 endpoints with the same concurrency *per endpoint* (a fleet adds
  capacity: the ratio to one endpoint should grow near-linearly).

Each fake server runs in a process of its own, as a real one does. Throughput is reported
twice: over the whole wall time (Ray's includes starting its actor pool and importing the
library in each actor, tens of seconds on a 2-core machine: the "first s" column) and in
steady state, from the first record written to the last.

The latency is long enough (1 s) that the client's CPU is not the bottleneck on a 2-core
machine: with 0.2 s, four endpoints x 2 actors saturate both cores and the fleet rows
measure the CPU, not the engine.

    PYTHONPATH=. python benchmarks/bench_scale.py [--items 120] [--latency 1.0] [--concurrency 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from taskcal_agents import tasks
from taskcal_agents.datasets import DatasetItem
from taskcal_agents.sampling import OpenAISampler
from taskcal_agents.testing import start_process
from taskcal_agents.workflow._ray_engine import RayEngine, run_sampling_ray
from taskcal_agents.workflow._runner import SampleSettings, run_sampling, sample_header
from taskcal_agents.workflow._store import SamplesStore

TASK = tasks.tool_decision()
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def _items(count: int, tag: str) -> list[DatasetItem]:
    return [
        DatasetItem(
            id=f"{tag}-{k}",
            messages=[{"role": "user", "content": f"weather in city {k}?"}],
            tools=[TOOL],
            label="tool_call",
        )
        for k in range(count)
    ]


class _Clock:
    """Times of the first and last record written."""

    def __init__(self) -> None:
        self.first: float | None = None
        self.last: float | None = None
        self.count = 0

    def __call__(self, record: dict[str, Any] | None) -> None:
        now = time.perf_counter()
        if record is not None:
            self.first = self.first or now
            self.last = now
            self.count += 1

    def steady(self) -> float:
        """Items per second from the first record to the last."""
        if self.first is None or self.last is None or self.count < 2:
            return float("nan")
        return (self.count - 1) / max(self.last - self.first, 1e-9)


def run(engine: str, endpoints: list[str], items: list[DatasetItem], concurrency: int) -> dict:
    settings = SampleSettings(n=4, model="fake-model")
    clock = _Clock()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "s.jsonl"
        with SamplesStore.open(out, sample_header(TASK, settings, None)) as store:
            start = time.perf_counter()
            if engine == "local":
                sampler = OpenAISampler(endpoints[0], "fake-model", allow_seed=False)
                report = run_sampling(
                    TASK, items, sampler, store, settings, concurrency=concurrency, on_record=clock
                )
                sampler.close()
            else:
                ray_engine = RayEngine(
                    endpoints=tuple(endpoints),
                    model="fake-model",
                    concurrency=concurrency,
                    batch_size=4,
                )
                report = run_sampling_ray(TASK, items, store, settings, ray_engine, on_record=clock)
            wall = time.perf_counter() - start
    assert report.written == len(items), report.failures[:3]
    first = (clock.first or start) - start
    return {"wall": wall, "first": first, "total": len(items) / wall, "steady": clock.steady()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=120)
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per request")
    parser.add_argument("--concurrency", type=int, default=2, help="per endpoint")
    args = parser.parse_args()

    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    c = args.concurrency
    rows: list[tuple[str, int, int, dict]] = []
    processes = []
    try:
        urls = []
        for _ in range(4):
            process, url = start_process(latency=args.latency)
            processes.append(process)
            urls.append(url)
        rows.append(("local", 1, c, run("local", urls[:1], _items(args.items, "l1"), c)))
        for k in (1, 2, 4):
            result = run("ray", urls[:k], _items(args.items, f"r{k}"), c * k)
            rows.append(("ray", k, c * k, result))
    finally:
        for process in processes:
            process.kill()
            process.wait()
        ray.shutdown()
    ideal = c / (2 * args.latency)  # items/s of one endpoint at concurrency c
    print(
        f"{args.items} items, n=4 + greedy (2 requests/item), latency {args.latency}s, "
        f"concurrency {c} per endpoint; ideal per endpoint {ideal:.1f} items/s"
    )
    print(
        f"{'engine':<7}{'endp.':>6}{'conc.':>6}{'wall s':>9}{'first s':>9}{'items/s':>9}"
        f"{'steady':>9}{'vs ideal':>10}{'vs local':>10}{'vs 1 endp.':>11}"
    )
    local = rows[0][3]
    one = rows[1][3]
    for engine, k, conc, r in rows:
        vs_local = r["steady"] / local["steady"]
        vs_one = r["steady"] / one["steady"] if engine == "ray" else float("nan")
        print(
            f"{engine:<7}{k:>6}{conc:>6}{r['wall']:>9.1f}{r['first']:>9.1f}{r['total']:>9.2f}"
            f"{r['steady']:>9.2f}{r['steady'] / (ideal * k):>10.2f}{vs_local:>10.2f}{vs_one:>11.2f}"
        )


if __name__ == "__main__":
    main()
