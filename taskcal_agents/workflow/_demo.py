"""The built-in demonstration: calibrated MBR on a task with signal, then tool-use decisions.

Everything ``taskcal demo`` does, as functions. Each part samples into a resumable samples
file and compares decoders with the workflow's cross-fitted evaluation
(:func:`~taskcal_agents.workflow._evaluate.evaluate_arrays`, the function behind ``taskcal
evaluate``: paired savings and a label-shuffle test):

1. **STS-B** (:func:`stsb_items`): random sentence pairs of the STS-B dev set, rated 0–5
   with L1 cost (the data set's default task, read from the shared data folder), each
   read as a one-pass belief from ``top_logprobs`` under a choice constraint
   (:mod:`taskcal_agents.sampling._logprob`: one forward pass per item).
2. **Tool use** (:func:`demo_items`): 36 requests written for this library, each with its
   tools and true label, decided as call / ask / refuse (:func:`demo_task`) from
   :data:`DEMO_N` completions sampled with the tools, whose calls are checked against the
   tools' schemas and the request (argument grounding, :mod:`taskcal_agents.parsing._grounding`).
   Four requests, one per outcome (:func:`demo_live_items`), are then decided live through
   the runtime path: N fresh completions → :meth:`~taskcal_agents.decision.Decider.decide`
   with the request's :class:`~taskcal_agents.parsing.GroundingContext`, under the
   effect-aware task (:func:`demo_live_task`: a read is made on weaker evidence than a
   payment, which is confirmed with the exact call) and the calibrator shipped for the
   model, else a Dirichlet map fitted on the tool-use requests; a call decision sends a
   grounded call, an ask decision a question that names the missing argument.

:class:`StepTimer` records where the time goes; :func:`run_demo` stores it, with both
evaluations and the decisions, in ``demo.json``.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from taskcal_agents.workflow._demo_live import (
    ShownDecision,
    decide_live,
    live_calibrator,
)
from taskcal_agents.workflow._demo_parts import evaluate_part, sample_part
from taskcal_agents.workflow._demo_tasks import (
    DEMO_COST,
    DEMO_PROMPT,
    STSB_ITEMS,
    STSB_PROMPT,
    STSB_SEED,
    demo_items,
    demo_live_items,
    demo_live_task,
    demo_task,
    stsb_items,
    stsb_task,
)

if TYPE_CHECKING:
    from taskcal_agents.datasets import DatasetItem
    from taskcal_agents.decision import Task
    from taskcal_agents.workflow._runner import SampleSettings

__all__ = [
    "DEMO_CONCURRENCY",
    "DEMO_COST",
    "DEMO_FORMAT",
    "DEMO_FORMAT_VERSION",
    "DEMO_MAX_TOKENS",
    "DEMO_MODEL",
    "DEMO_N",
    "DEMO_PERMUTATIONS",
    "DEMO_PROMPT",
    "DEMO_TEMPERATURE",
    "EVALUATION_S_PER_SHUFFLE",
    "PSEUDO_SAMPLES",
    "STSB_ITEMS",
    "STSB_PROMPT",
    "STSB_SEED",
    "WARMUP_ITEMS",
    "DemoPart",
    "DemoResult",
    "Estimate",
    "ShownDecision",
    "StepTimer",
    "demo_items",
    "demo_live_items",
    "demo_live_task",
    "demo_task",
    "run_demo",
    "stsb_items",
    "stsb_task",
]

DEMO_MODEL = "qwen2.5-coder-0.5b-instruct"
"""The registry model the demo serves by default (STS-B shows signal on it)."""

DEMO_N = 8
"""Completions sampled per tool-use request."""

DEMO_MAX_TOKENS = 64
"""Their length limit: a call, a short question or a refusal fits; a longer text is cut
and counts as unparsed, as it would in deployment under this limit."""

DEMO_TEMPERATURE = 0.7
"""Their sampling temperature."""

DEMO_CONCURRENCY = 8
"""Items sampled at once. Eight tool-use requests keep up to 64 sequences decoding: a
request ends with its longest sample, and at four in flight the batch thinned to 16-25
sequences while one sample ran on to the length limit."""

DEMO_PERMUTATIONS = 200
"""Label shuffles of each part's test, as ``taskcal evaluate``: p-values down to 1/201 ≈
0.005. Each shuffle refits the Dirichlet map, with its inner cross-validation, in every
fold (about 0.06 s per shuffle for the STS-B part on two cores)."""

PSEUDO_SAMPLES = 16
"""The one-pass belief enters calibration and decisions as this many pseudo-samples
(smoothed with the default α, as ``taskcal sample --belief one_pass --n 16``)."""

WARMUP_ITEMS = {"stsb": 16, "tool_use": 8}
"""Items of each part sampled first and timed (at the default concurrency, two rounds in
flight for STS-B, one for the tool-use part): the expected duration is printed from their
pace."""

EVALUATION_S_PER_SHUFFLE = 0.1
"""Expected seconds of one part's evaluation per label shuffle (about 0.06 s measured for
the STS-B part on two cores, 0.05 s for the tool-use part; rounded up)."""

DEMO_FORMAT = "taskcal.demo"
"""The ``format`` of ``demo.json``."""
DEMO_FORMAT_VERSION = 2
"""Its ``format_version``."""


class StepTimer:
    """Wall-clock seconds per named step, in the order the steps started.

    Attributes:
        steps: Seconds by step name (a step entered twice adds up).
        started: ``time.monotonic()`` when the timer was made (the start of ``total``).
    """

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.steps: dict[str, float] = {}

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time the block as step *name* (listed from when it starts)."""
        self.steps.setdefault(name, 0.0)
        start = time.monotonic()
        try:
            yield
        finally:
            self.add(name, time.monotonic() - start)

    def add(self, name: str, seconds: float) -> None:
        """Add *seconds* to step *name*."""
        self.steps[name] = self.steps.get(name, 0.0) + seconds

    def as_dict(self) -> dict[str, float]:
        """The steps and ``total`` (seconds since the timer was made), rounded to 0.1 s."""
        out = {name: round(seconds, 1) for name, seconds in self.steps.items()}
        out["total"] = round(time.monotonic() - self.started, 1)
        return out


@dataclass
class DemoPart:
    """One evaluated part of the demo.

    Attributes:
        key: ``"stsb"`` or ``"tool_use"`` (the prefix of its files and timing steps).
        title: The title of its decoder table.
        samples_path: Its samples file (rerunning the demo resumes it).
        evaluation_path: Its evaluation file (``taskcal report --evaluation`` reads it).
        evaluation: The evaluation (``taskcal.evaluation`` format).
        n_items: Items evaluated.
        n_sampled_now: Items sampled by this run (the others were in the samples file).
    """

    key: str
    title: str
    samples_path: Path
    evaluation_path: Path
    evaluation: dict[str, Any]
    n_items: int
    n_sampled_now: int


@dataclass
class DemoResult:
    """What :func:`run_demo` produced.

    Attributes:
        model: The served model name.
        base_url: The server URL.
        parts: The evaluated parts, STS-B first when it ran.
        decisions: The requests decided live.
        timings: Seconds per step (see :class:`StepTimer`), with ``total``.
        path: The ``demo.json`` written.
    """

    model: str
    base_url: str
    parts: list[DemoPart]
    decisions: list[ShownDecision]
    timings: dict[str, float] = field(default_factory=dict)
    path: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able result (``demo.json``)."""
        return {
            "format": DEMO_FORMAT,
            "format_version": DEMO_FORMAT_VERSION,
            "model": self.model,
            "base_url": self.base_url,
            "timings_s": dict(self.timings),
            "parts": {
                part.key: {
                    "title": part.title,
                    "samples": str(part.samples_path),
                    "evaluation_file": str(part.evaluation_path),
                    "n_items": part.n_items,
                    "n_sampled_now": part.n_sampled_now,
                    "evaluation": part.evaluation,
                }
                for part in self.parts
            },
            "decisions": [
                {
                    "text": shown.text,
                    "truth": shown.truth,
                    "tools": list(shown.tools),
                    "decision": shown.decision.to_metadata(),
                    "reply": shown.reply,
                    "calibrator": shown.calibrator,
                    "bar": shown.bar,
                }
                for shown in self.decisions
            ],
        }


Observer = Callable[[str, int, int], Callable[[int], None]]
"""``observe(description, total, completed)`` is called when a phase starts and returns the
function to call with each step's count (for progress bars)."""


@dataclass(frozen=True)
class Estimate:
    """The demo's expected remaining duration, from the pace of its first items.

    Attributes:
        seconds: Expected seconds from now to the end.
        per_item: Measured seconds per item, by part (items sampled at once share the time).
    """

    seconds: float
    per_item: dict[str, float]


def _slug(name: str) -> str:
    """*name* as a file name part (a served name may be a folder path)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "model"


def _estimate(
    plan: Sequence[tuple[str, str, Task, list[DatasetItem], SampleSettings, str]],
    left: dict[str, int],
    per_item: dict[str, float],
    per_request: float,
    show: int,
    permutations: int,
) -> Estimate:
    """Expected seconds left: items at their part's pace, live decisions, evaluations."""
    seconds = sum(left[key] * per_item[key] for key in left)
    seconds += len(plan) * (EVALUATION_S_PER_SHUFFLE * permutations + 2.0)
    seconds += show * per_request
    return Estimate(seconds=seconds, per_item=dict(per_item))


def run_demo(
    sampler: Any,
    out_dir: Path,
    *,
    model: str,
    base_url: str,
    stsb: Sequence[DatasetItem] | None = None,
    folds: int = 5,
    permutations: int = DEMO_PERMUTATIONS,
    show: int = 4,
    concurrency: int = DEMO_CONCURRENCY,
    timer: StepTimer | None = None,
    release: Callable[[], None] | None = None,
    observe: Observer | None = None,
    on_estimate: Callable[[Estimate], None] | None = None,
) -> DemoResult:
    """Sample both parts, decide a few requests, evaluate, and write ``demo.json``.

    Order: STS-B beliefs, tool-use samples, the live decisions (the last use of the
    server; *release* is called next, so a server started for the demo stops before the
    CPU-heavy evaluation), then each part's evaluation.

    Args:
        sampler: An :class:`~taskcal_agents.sampling.OpenAISampler` (or any object
            with its ``sample`` method: ``logprobs`` for STS-B, completions with tool
            calls for the tool-use part).
        out_dir: Where the samples, evaluation files and ``demo.json`` go.
        model: The served model name (recorded; it names the samples files).
        base_url: The server URL (recorded).
        stsb: The STS-B items (:func:`stsb_items`); ``None`` runs the tool-use part only.
        folds: Cross-fitting folds.
        permutations: Label shuffles of each part's test (0 skips it).
        show: Requests decided live at the end, of the four of :func:`demo_live_items`.
        concurrency: Items sampled at once.
        timer: Records the steps (``<part>_sampling``, ``decisions``, ``server_stop``,
            ``<part>_evaluation`` and its ``<part>_shuffle_test``); a new one by default.
        release: Called after the last request to the server.
        observe: Progress callback (see :data:`Observer`).
        on_estimate: Called once with the expected remaining duration, after the first
            :data:`WARMUP_ITEMS` items each part has left are sampled and timed (not called
            when no part has items left).

    Returns:
        The result; ``timings`` ends with ``total``.

    Raises:
        SamplingError, ServerError: Sampling failed (a rerun resumes).
    """
    from taskcal_agents._files import write_json
    from taskcal_agents.workflow._runner import SampleSettings
    from taskcal_agents.workflow._store import read_samples

    timer = timer or StepTimer()

    def quiet(description: str, total: int, completed: int) -> Callable[[int], None]:
        return lambda _: None

    observe = observe or quiet
    out_dir.mkdir(parents=True, exist_ok=True)
    slug = _slug(model)
    plan: list[tuple[str, str, Task, list[DatasetItem], SampleSettings, str]] = []
    if stsb is not None:
        plan.append(
            (
                "stsb",
                f"Part 1 — STS-B dev, {len(stsb)} random sentence pairs rated 0–5 (L1 cost)",
                stsb_task(),
                list(stsb),
                SampleSettings(
                    n=PSEUDO_SAMPLES,
                    greedy=False,
                    model=model,
                    base_url=base_url,
                    belief="one_pass",
                ),
                "stsb (shared data)",
            )
        )
    tool_items = demo_items()
    plan.append(
        (
            "tool_use",
            f"Part {len(plan) + 1} — {len(tool_items)} built-in tool-use requests: call / ask / "
            f"refuse, N = {DEMO_N} with argument grounding",
            demo_task(),
            tool_items,
            SampleSettings(
                n=DEMO_N,
                temperature=DEMO_TEMPERATURE,
                max_tokens=DEMO_MAX_TOKENS,
                greedy=False,
                model=model,
                base_url=base_url,
            ),
            "builtin:demo",
        )
    )
    # The tool-use file names its sampling (N completions; demo format 1 read one pass there),
    # so an out-dir of an older demo resumes nothing it cannot.
    # The STS-B file names its prompt too (before, the chat template's default one).
    stems = {"stsb": "stsb.own_prompt", "tool_use": f"tool_use.n{DEMO_N}"}
    paths = {key: out_dir / f"{stems[key]}.{slug}.samples.jsonl" for key, *_ in plan}
    sampled: dict[str, int] = {}

    def sample(
        key: str, task: Task, items: list[DatasetItem], settings: SampleSettings, dataset: str
    ) -> int:
        with timer.step(f"{key}_sampling"):
            return sample_part(
                key,
                task,
                items,
                sampler,
                paths[key],
                settings,
                dataset,
                concurrency=concurrency,
                observe=observe,
            )

    per_item: dict[str, float] = {}
    left: dict[str, int] = {}
    per_request = 0.0
    # The first items still to sample of each part first, timed: their pace gives the
    # expected duration (a resumed part is timed on the items it has left).
    for key, _, task, items, settings, dataset in plan:
        done = set(read_samples(paths[key]).records) if paths[key].exists() else set()
        todo = [item for item in items if item.id not in done]
        head = todo[: WARMUP_ITEMS[key]]
        start = time.monotonic()
        sampled[key] = sample(key, task, head, settings, dataset)
        seconds = time.monotonic() - start
        if sampled[key]:
            per_item[key] = seconds / sampled[key]
            left[key] = len(todo) - sampled[key]
            if key == "tool_use":  # one request alone takes about one round in flight
                per_request = seconds / -(-sampled[key] // concurrency)
    key, _, task, items, settings, _ = plan[-1]
    live_task = demo_live_task()
    shipped = live_calibrator(live_task, model)
    if shipped is not None:  # more completions per live request than per tool-use item
        per_request *= shipped.metadata["record"]["sampling"]["n"] / settings.n
    if on_estimate is not None and per_item:  # every part with items left was timed
        on_estimate(_estimate(plan, left, per_item, per_request, show, permutations))
    for key, _, task, items, settings, dataset in plan:
        sampled[key] += sample(key, task, items, settings, dataset)
    with timer.step("decisions"):
        decisions = decide_live(
            live_task, items, demo_live_items()[:show], paths[key], sampler, settings,
            shipped=shipped,
        )  # fmt: skip
    if release is not None:
        with timer.step("server_stop"):
            release()
    parts = []
    for key, title, task, items, _, _ in plan:
        with timer.step(f"{key}_evaluation"):
            evaluation, evaluation_path = evaluate_part(
                key,
                title,
                task,
                items,
                paths[key],
                out_dir,
                folds=folds,
                permutations=permutations,
                observe=observe,
                timer=timer,
            )
        parts.append(
            DemoPart(
                key=key,
                title=title,
                samples_path=paths[key],
                evaluation_path=evaluation_path,
                evaluation=evaluation,
                n_items=len(items),
                n_sampled_now=sampled[key],
            )
        )
    result = DemoResult(model=model, base_url=base_url, parts=parts, decisions=decisions)
    result.path = out_dir / "demo.json"
    result.timings = timer.as_dict()
    write_json(result.to_dict(), result.path)
    return result
