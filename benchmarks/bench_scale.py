"""Throughput of `taskcal sample`'s engines: local (thread pool) vs Ray (HTTP actors).

Fake OpenAI-compatible endpoints answer every request after a fixed latency (the model's
compute time), each serving at most ``--concurrency`` (c) requests at once and queueing
the rest, like a GPU server at its batch limit: an endpoint is a fixed amount of capacity,
so more endpoints can only help by adding capacity, not by allowing more parallel
requests. Each item costs two requests (N samples, greedy). Rows, in one run:

* ``local``, 1 endpoint, c in flight: the thread-pool engine, the baseline;
* ``ray``, 1 endpoint, c in flight: Ray's HTTP actors at equal concurrency ("vs local"
  is Ray's overhead or gain over threads);
* ``ray``, 2 and 4 endpoints, c in flight *per endpoint* (2c, 4c): a fleet adds
  capacity, so the ratio to one endpoint ("vs 1 endp.") should grow near-linearly;
* ``ray control``, 1 endpoint at 4c in flight: the same actors as the 4-endpoint row
  against one endpoint of capacity c. It must not be faster than one endpoint at c (ratio
  near 1.00): were it as fast as 4 endpoints, the fleet rows would measure the client's
  parallelism rather than the endpoints' capacity.

Each fake server runs in a process of its own, as a real one does. Throughput is reported
twice: over the whole wall time (Ray's includes starting its actor pool and importing the
library in each actor, tens of seconds on a 2-core machine: the "first s" column) and in
steady state, between the 10th and the 90th percentile record (the first records come
out of a full queue and the last drain it). "CPU s/it" is the whole
machine's busy CPU time during the run (user + nice + system + irq + softirq + steal from
``/proc/stat``, clients and servers together) per item, over the whole run and (the
second "steady") in that window, without the actors' start-up; nan
where ``/proc/stat`` is missing.

The latency is 1 s so that the client's CPU is not the bottleneck on a 2-core machine:
with 0.2 s, four endpoints x 2 actors saturate both cores and the fleet rows measure the
CPU, not the engine (the CPU column shows how close a run comes to that).

    PYTHONPATH=. python benchmarks/bench_scale.py [--items 120] [--latency 1.0] [--concurrency 2]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from taskcal_agents.datasets import DatasetItem
from taskcal_agents.decision import _presets as tasks
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
    """The time (and the machine's busy CPU ticks) at which each record was written."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.busy: list[int | None] = []

    @property
    def first(self) -> float | None:
        return self.times[0] if self.times else None

    def __call__(self, record: dict[str, Any] | None) -> None:
        if record is not None:
            self.times.append(time.perf_counter())
            self.busy.append(_busy_jiffies())

    def _window(self) -> tuple[int, int] | None:
        """The 10th and 90th percentile records: the first come out of a full queue and the
        last drain it, so both edges would overstate or understate the steady rate."""
        if len(self.times) < 10:
            return None
        return len(self.times) // 10, len(self.times) * 9 // 10

    def steady(self) -> float:
        """Items per second between the 10th and the 90th percentile record."""
        window = self._window()
        if window is None:
            return float("nan")
        lo, hi = window
        return (hi - lo) / max(self.times[hi] - self.times[lo], 1e-9)

    def steady_cpu(self) -> float:
        """Busy CPU seconds per item in the same window."""
        window = self._window()
        if window is None:
            return float("nan")
        lo, hi = window
        a, b = self.busy[lo], self.busy[hi]
        if a is None or b is None:
            return float("nan")
        return (b - a) / os.sysconf("SC_CLK_TCK") / (hi - lo)


def _busy_jiffies() -> int | None:
    """The machine's busy CPU time so far in clock ticks (``None``: no ``/proc/stat``).

    user + nice + system + irq + softirq + steal of the ``cpu`` line (idle and iowait are
    not busy; guest time is already inside user and nice).
    """
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[1:9])
    return user + nice + system + irq + softirq + steal


def run(engine: str, endpoints: list[str], items: list[DatasetItem], concurrency: int) -> dict:
    settings = SampleSettings(n=4, model="fake-model")
    clock = _Clock()
    busy_before = _busy_jiffies()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "s.jsonl"
        with SamplesStore.open(out, sample_header(TASK, settings, None)) as store:
            start = time.perf_counter()
            if engine == "local":
                with OpenAISampler(endpoints[0], "fake-model", allow_seed=False) as sampler:
                    report = run_sampling(
                        TASK,
                        items,
                        sampler,
                        store,
                        settings,
                        concurrency=concurrency,
                        on_record=clock,
                    )
            else:
                ray_engine = RayEngine(
                    endpoints=tuple(endpoints),
                    model="fake-model",
                    concurrency=concurrency,
                    batch_size=4,
                )
                report = run_sampling_ray(TASK, items, store, settings, ray_engine, on_record=clock)
            wall = time.perf_counter() - start
    busy_after = _busy_jiffies()
    assert report.written == len(items), report.failures[:3]
    first = (clock.first or start) - start
    cpu = float("nan")
    if busy_before is not None and busy_after is not None:
        cpu = (busy_after - busy_before) / os.sysconf("SC_CLK_TCK") / len(items)
    return {
        "wall": wall,
        "first": first,
        "total": len(items) / wall,
        "steady": clock.steady(),
        "cpu": cpu,
        "cpu_steady": clock.steady_cpu(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=120)
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per request")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=2,
        help="requests in flight per endpoint, and each endpoint's capacity",
    )
    args = parser.parse_args()

    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    c = args.concurrency
    rows: list[tuple[str, int, int, dict]] = []  # (row, endpoints, in flight, result)
    processes = []
    try:
        urls = []
        for _ in range(4):
            process, url = start_process(latency=args.latency, capacity=c)
            processes.append(process)
            urls.append(url)
        rows.append(("local", 1, c, run("local", urls[:1], _items(args.items, "l1"), c)))
        for k in (1, 2, 4):
            result = run("ray", urls[:k], _items(args.items, f"r{k}"), c * k)
            rows.append(("ray", k, c * k, result))
        control = run("ray", urls[:1], _items(args.items, "c1"), 4 * c)
        rows.append(("ray control", 1, 4 * c, control))
    finally:
        for process in processes:
            process.kill()
            process.wait()
        ray.shutdown()
    ideal = c / (2 * args.latency)  # items/s of one endpoint serving c requests at a time
    print(
        f"{args.items} items, n=4 + greedy (2 requests/item), latency {args.latency}s, "
        f"capacity and concurrency {c} per endpoint; ideal per endpoint {ideal:.1f} items/s"
    )
    print(
        f"{'row':<12}{'endp.':>6}{'conc.':>6}{'wall s':>9}{'first s':>9}{'items/s':>9}"
        f"{'steady':>9}{'vs ideal':>10}{'vs local':>10}{'vs 1 endp.':>11}{'CPU s/it':>10}"
        f"{'steady':>8}"
    )
    local, one, four = rows[0][3], rows[1][3], rows[3][3]
    for name, k, conc, r in rows:
        vs_local = r["steady"] / local["steady"]
        vs_one = r["steady"] / one["steady"] if name != "local" else float("nan")
        print(
            f"{name:<12}{k:>6}{conc:>6}{r['wall']:>9.1f}{r['first']:>9.1f}{r['total']:>9.2f}"
            f"{r['steady']:>9.2f}{r['steady'] / (ideal * k):>10.2f}{vs_local:>10.2f}"
            f"{vs_one:>11.2f}{r['cpu']:>10.3f}{r['cpu_steady']:>8.3f}"
        )
    print(
        f"control: 1 endpoint at {4 * c} in flight vs at {c}: "
        f"{control['steady'] / one['steady']:.2f}x (capacity {c} caps it: expect about 1.00x; "
        f"4 endpoints: {four['steady'] / one['steady']:.2f}x)"
    )


if __name__ == "__main__":
    main()
