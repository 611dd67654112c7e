"""Concurrent sampling of a dataset into the resumable samples store.

Per item: N completions at the sampling temperature and one greedy (temperature 0)
completion, all parsed by the task's g_T. Each finished item becomes one record, appended
atomically by the single writer (the calling thread); workers only talk to the model.
A rerun skips the ids already in the file.

Items whose label is ``null`` (answer-or-abstain data with reference answers) are graded
as they are sampled (:func:`~taskcal_agents.workflow._grading.grade_item`): the record's
true label is the task's *answer* label when the answer the system would give is correct,
its *abstain* label otherwise.

For a task with ``answer_clusters`` the N answers are clustered by meaning
(:func:`~taskcal_agents.parsing._answer_clusters.cluster_samples`, the runtime's g_T; with method
``entailment`` the sampler is also the judge), the record keeps the clusters in
``clusters`` (:func:`~taskcal_agents.parsing._answer_clusters.clusters_record`: the number of
clusters, the cluster of each sample, the modal answer), and the answer graded is the
modal cluster's representative, the one the runtime answers with.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage

from taskcal_agents._validation import check_int
from taskcal_agents.datasets import DatasetItem
from taskcal_agents.decision import (
    DEFAULT_N_SAMPLES,
    AdaptiveSampling,
    StopCheck,
    check_adaptive,
    draw_in_rounds,
    stop_check_messages,
)
from taskcal_agents.errors import ConfigurationError, SamplingError
from taskcal_agents.parsing import (
    UNPARSED_REASONS,
    AnswerClusters,
    GroundingContext,
    cluster_samples,
    clusters_record,
    entailment_judge,
    question_of,
    tool_names_of,
    unparsed_reason,
)
from taskcal_agents.sampling import Sampler, drive, drive_rounds, with_task_prompt
from taskcal_agents.workflow._grading import grade_item
from taskcal_agents.workflow._store import SamplesStore

if TYPE_CHECKING:
    from taskcal_agents.decision import Decider, Task


@dataclass(frozen=True)
class SampleSettings:
    """How each item is sampled (stored in the samples file's header)."""

    n: int = DEFAULT_N_SAMPLES
    """Completions per item at ``temperature``."""
    temperature: float = 1.0
    """Sampling temperature of the N completions."""
    greedy: bool = True
    """Also draw one temperature-0 completion per item."""
    max_tokens: int | None = 256
    """Completion length limit (``None``: the server's default)."""
    model: str | None = None
    """The served model name (recorded; resuming with another model is refused)."""
    base_url: str | None = None
    """The server URL (recorded only)."""
    belief: str = "samples"
    """``"samples"``: N sampled completions parsed by g_T; ``"one_pass"``: the one-pass
    belief read from ``top_logprobs`` under a choice constraint (see
    :mod:`taskcal_agents.sampling._logprob`), stored as probabilities and smoothed like
    ``n`` pseudo-samples. A tool decision's is over its options "call TOOL", ask and refuse
    (:mod:`taskcal_agents.sampling._one_pass`; 16 pseudo-samples), and its greedy completion
    is the call it sends. ``"logprob"``, the earlier name, reads every task's labels as the
    choices (a tool decision's too)."""
    choices: tuple[str, ...] | None = None
    """With ``belief="logprob"``: the string the model must emit for each task label, in
    label order (default: the labels themselves). The task's prompt should ask for them."""
    adaptive: float | None = None
    """Adaptive N: draw in rounds (4, 8, … up to ``n``) and stop once the stopping rule of
    :mod:`taskcal_agents.decision._adaptive` puts the probability that ``n`` samples would
    change the action below this ε (needs the calibrator's decider); ``None``: all ``n``."""
    adaptive_artefact: str | None = None
    """With ``adaptive``: the content id of the calibrator artefact whose decider the rule
    watches (:func:`~taskcal_agents.production._decision_log.artefact_id`; ``taskcal sample``
    records it), so that resuming under another calibrator or stopping prior is refused."""

    def __post_init__(self) -> None:
        check_int(self.n, "SampleSettings parameter 'n'", minimum=1, kind="an integer")
        if not self.temperature >= 0:
            msg = (
                "SampleSettings parameter 'temperature' must be >= 0, got "
                f"{self.temperature!r}; use 1.0 for plain sampling."
            )
            raise ConfigurationError(msg)
        if self.temperature == 0 and self.n > 1 and self.belief == "samples":
            msg = (
                f"SampleSettings: temperature 0 with n = {self.n} would draw {self.n} identical "
                "greedy samples (and vLLM refuses n > 1 at temperature 0); sample at a "
                "temperature > 0, or set n = 1 (the greedy completion is drawn besides the "
                "samples unless --no-greedy)."
            )
            raise ConfigurationError(msg)
        if self.belief not in ("samples", *ONE_PASS_BELIEFS):
            msg = (
                "SampleSettings parameter 'belief' must be 'samples' or 'one_pass', got "
                f"{self.belief!r}."
            )
            raise ConfigurationError(msg)
        if self.choices is not None:
            object.__setattr__(self, "choices", tuple(self.choices))
        if self.adaptive is not None:
            if self.belief != "samples":
                msg = (
                    "SampleSettings parameter 'adaptive' needs belief='samples' (it stops a "
                    f"draw of samples early), got belief={self.belief!r}."
                )
                raise ConfigurationError(msg)
            try:
                AdaptiveSampling(epsilon=self.adaptive)
            except ValueError as exc:
                msg = (
                    f"SampleSettings parameter 'adaptive' must be an epsilon in (0, 1) or None, "
                    f"got {self.adaptive!r}."
                )
                raise ConfigurationError(msg) from exc
        if self.adaptive_artefact is not None and self.adaptive is None:
            msg = (
                "SampleSettings parameter 'adaptive_artefact' names the artefact adaptive N "
                "stops by; it needs 'adaptive' (an epsilon), got adaptive=None."
            )
            raise ConfigurationError(msg)
        if self.max_tokens is not None and self.max_tokens < 1:
            msg = (
                "SampleSettings parameter 'max_tokens' must be >= 1 or None, got "
                f"{self.max_tokens!r}."
            )
            raise ConfigurationError(msg)

    def to_dict(self) -> dict[str, Any]:
        """The settings as a JSON-able dict."""
        return asdict(self)


# --------------------------------------------------------------------------------------
# messages <-> JSON


def message_to_dict(message: AIMessage) -> dict[str, Any]:
    """The parts of a completion worth keeping: text content and tool calls."""
    out: dict[str, Any] = {"content": message.content}
    out["tool_calls"] = [
        {"name": c["name"], "args": c["args"], "id": c.get("id")} for c in message.tool_calls
    ]
    if message.invalid_tool_calls:
        out["invalid_tool_calls"] = [
            {k: c.get(k) for k in ("name", "args", "id", "error")}
            for c in message.invalid_tool_calls
        ]
    finish = (message.response_metadata or {}).get("finish_reason")
    if finish is not None:
        out["finish_reason"] = finish
    return out


def message_from_dict(data: Mapping[str, Any]) -> AIMessage:
    """Rebuild an :class:`AIMessage` from :func:`message_to_dict` output.

    A stored ``finish_reason`` goes back into ``response_metadata``.
    """
    finish = data.get("finish_reason")
    return AIMessage(
        response_metadata={} if finish is None else {"finish_reason": finish},
        content=data.get("content") or "",
        tool_calls=[
            {"name": c["name"], "args": c.get("args") or {}, "id": c.get("id"), "type": "tool_call"}
            for c in data.get("tool_calls") or []
        ],
        invalid_tool_calls=[
            {
                "name": c.get("name"),
                "args": c.get("args"),
                "id": c.get("id"),
                "error": c.get("error"),
                "type": "invalid_tool_call",
            }
            for c in data.get("invalid_tool_calls") or []
        ],
    )


def build_messages(task: Task, item: DatasetItem) -> list[dict[str, Any]]:
    """The request for *item*: its messages with the task's prompt merged in.

    The prompt goes in by the one policy of :mod:`taskcal_agents.sampling._prompts`, as in
    deployment: appended to the item's first system (or developer) message, else
    prepended as a system message.
    """
    return [dict(m) for m in with_task_prompt(item.messages, task.prompt)]


def item_context(task: Task, item: DatasetItem) -> GroundingContext | None:
    """What *item*'s sampled calls are grounded in: its tools and its own messages.

    The task's prompt is not evidence (it is the deployment's instruction, the same for
    every item). ``None`` for a task without grounding.
    """
    if task.grounding is None:
        return None
    return GroundingContext(item.tools, item.messages)


def offered_tool_names(item: DatasetItem) -> tuple[str, ...]:
    """The names of the tools offered with *item* (empty: none, so any call is unoffered)."""
    return tool_names_of(item.tools)


def is_length_cut(data: Mapping[str, Any]) -> bool:
    """Whether a stored completion (:func:`message_to_dict`) ended on the length limit."""
    return data.get("finish_reason") == "length"


# --------------------------------------------------------------------------------------
# one item


def _logprob_belief(sampler: Any, messages: Any, choices: list[str], **options: Any) -> Any:
    """The one-pass belief (tests replace this function)."""
    from taskcal_agents.sampling import logprob_belief

    return logprob_belief(sampler, messages, choices, **options)


ONE_PASS_BELIEFS = ("one_pass", "logprob")
"""The names of the one-pass belief in :attr:`SampleSettings.belief` (``"logprob"``: its
earlier name, which reads a tool decision's labels as the choices, as before its tool
options)."""


def is_tool_decision(task: Task) -> bool:
    """Whether *task* decides call / ask / refuse (its one-pass belief is over the tools)."""
    return task.call_action is not None and task.call_action in task.labels


def _one_pass_belief(sampler: Sampler, task: Task, messages: Any, **options: Any) -> Any:
    """A tool decision's one-pass belief (:func:`~taskcal_agents.sampling.one_pass_protocol`)."""
    from taskcal_agents.sampling import one_pass_protocol

    return drive(one_pass_protocol(task, messages, **options), lambda r: sampler.sample(**r))


def draw_params(settings: SampleSettings, tools: Any, *, greedy: bool = False) -> dict[str, Any]:
    """The sampler parameters of an item's N samples, or (``greedy``) of its greedy draw.

    Every engine asks with these: the local runner through the sampler, the Ray engine
    in the body it posts.
    """
    if greedy:
        return {"n": 1, "temperature": 0.0, "tools": tools, "max_tokens": settings.max_tokens}
    return {
        "n": settings.n,
        "temperature": settings.temperature,
        "tools": tools,
        "max_tokens": settings.max_tokens,
    }


def _draw(
    sampler: Sampler,
    messages: Any,
    settings: SampleSettings,
    tools: Any,
    decider: Decider | None,
    tool_names: Sequence[str],
    context: GroundingContext | None = None,
) -> tuple[list[AIMessage], StopCheck | None]:
    """The N samples of an item, or with adaptive N the rounds until the rule stops.

    Returns:
        The samples and the last stopping-rule verdict (``None`` without adaptive N).
    """
    options = draw_params(settings, tools)
    options.pop("n")
    if settings.adaptive is None or decider is None:
        return sampler.sample(messages, n=settings.n, **options), None
    rule = AdaptiveSampling(epsilon=settings.adaptive)

    def stop(_: int, samples: list[AIMessage]) -> StopCheck:
        return stop_check_messages(
            decider, samples, settings.n, rule, tool_names=tool_names, context=context
        )

    protocol = draw_in_rounds(1, settings.n, adaptive=rule, stop_check=stop)
    (rounds,) = drive_rounds(protocol, lambda d: [sampler.sample(messages, n=d.n, **options)])
    if rounds.error is not None:
        raise rounds.error
    return rounds.samples, rounds.check


def sample_item(
    task: Task,
    item: DatasetItem,
    sampler: Sampler,
    settings: SampleSettings,
    *,
    decider: Decider | None = None,
    parsed: tuple[Sequence[str | None], str | None] | None = None,
) -> dict[str, Any]:
    """Sample, parse (and grade) one item; return its record.

    With the one-pass belief (``settings.belief`` ``"one_pass"``) the record holds ``probs``
    (one per task label) instead of sampled completions; the greedy completion is drawn
    either way. A tool decision's record says ``belief: "one_pass"``: its greedy completion
    is the call the decision sends.

    The samples are parsed with the item's offered tools (a call to any other tool is
    unparsed); the record keeps their names in ``tool_names`` (pass them to
    :meth:`Task.parse_completion` when re-parsing), and the tools and the item's messages
    (without the task prompt) in ``tools`` and ``messages``, which argument grounding checks
    the calls against (:func:`~taskcal_agents.workflow._data.record_context`), and counts
    why samples were unparsed in ``unparsed_reasons`` (``{"length": 5, "unoffered_tool": 2}``, see
    :func:`~taskcal_agents.parsing._labels.unparsed_reason`).

    With ``settings.adaptive`` the samples are drawn in rounds and stop by the rule of
    :mod:`taskcal_agents.decision._adaptive` under ``decider`` (the calibrator's task, map and α);
    the record says where in ``stopped_at`` (the samples drawn, ``n`` if it never stopped
    early) and ``change_probability`` (the rule's last estimate, 0 at ``n``).

    ``parsed`` gives the labels of the samples and of the greedy completion when they were
    already parsed by the task's g_T (the Ray engine parses in its postprocess step).

    Raises:
        SamplingError: The sampler failed or returned the wrong number of completions.
        ConfigurationError: ``settings.adaptive`` without ``decider``.
    """
    if settings.adaptive is not None and decider is None:
        msg = (
            "sample_item: SampleSettings.adaptive needs the decider whose action the stopping "
            "rule watches; pass decider=Decider(task, calibrator, alpha=...) (`taskcal sample "
            "--adaptive EPS --artefact FIT.json`)."
        )
        raise ConfigurationError(msg)
    tool_one_pass = (
        settings.belief == "one_pass" and settings.choices is None and is_tool_decision(task)
    )
    if tool_one_pass and not settings.greedy:
        msg = (
            f"sample_item: task {task.name!r}'s one-pass belief takes the call to ground and "
            "send from the greedy completion; sample with greedy=True (drop --no-greedy)."
        )
        raise ConfigurationError(msg)
    messages = build_messages(task, item)
    tools = item.tools or None
    names = offered_tool_names(item)
    start = time.perf_counter()
    lp: Any = None
    check: StopCheck | None = None
    try:
        if settings.belief in ONE_PASS_BELIEFS:
            samples: list[AIMessage] = []
            if tool_one_pass:
                lp = _one_pass_belief(
                    sampler, task, messages, tool_names=names, tools=tools,
                    temperature=settings.temperature,
                )  # fmt: skip
            else:
                lp = _logprob_belief(
                    sampler,
                    messages,
                    list(settings.choices or task.labels),
                    temperature=settings.temperature,
                    tools=tools,
                )
        else:
            samples, check = _draw(
                sampler, messages, settings, tools, decider, names, item_context(task, item)
            )
        greedy = (
            sampler.sample(messages, **draw_params(settings, tools, greedy=True))[0]
            if settings.greedy
            else None
        )
    except SamplingError:
        raise
    except Exception as exc:
        msg = f"sampling item {item.id!r} failed: {type(exc).__name__}: {exc}"
        raise SamplingError(msg) from exc
    wanted = settings.n if check is None or not check.stop else check.n_drawn
    if lp is None and len(samples) != wanted:
        msg = f"sampling item {item.id!r}: asked for n={wanted}, got {len(samples)} samples."
        raise SamplingError(msg)
    if parsed is None:
        labels = [task.parse_completion(m, tool_names=names) for m in samples]
        greedy_label = (
            task.parse_completion(greedy, tool_names=names) if greedy is not None else None
        )
    else:
        labels, greedy_label = list(parsed[0]), parsed[1]
        if len(labels) != len(samples):
            msg = f"sampling item {item.id!r}: {len(labels)} labels for {len(samples)} samples."
            raise SamplingError(msg)
    spec = task.answer_clusters
    clusters: AnswerClusters | None = None
    question: str | None = None
    if spec is not None and samples:
        question = question_of(messages)
        try:
            entails = (
                entailment_judge(sampler, question=question or "")
                if spec.method == "entailment"
                else None
            )
            clusters, _ = cluster_samples(task, samples, labels, question=question, entails=entails)
        except (SamplingError, ConfigurationError):
            raise
        except Exception as exc:
            msg = f"judging the answers of item {item.id!r} failed: {type(exc).__name__}: {exc}"
            raise SamplingError(msg) from exc
    reasons = Counter(
        unparsed_reason(m, tool_names=names)
        for m, label in zip(samples, labels, strict=True)
        if label is None
    )
    record: dict[str, Any] = {
        "id": item.id,
        "label": item.label,
        "labels": labels,
        "greedy_label": greedy_label,
        "unparsed_reasons": {r: reasons[r] for r in UNPARSED_REASONS if reasons[r]},
        "tool_names": list(names),
        "tools": list(item.tools),
        "messages": [dict(m) for m in item.messages],
        "samples": [message_to_dict(m) for m in samples],
        "greedy": message_to_dict(greedy) if greedy is not None else None,
        "elapsed_s": round(time.perf_counter() - start, 4),
    }
    if settings.adaptive is not None:
        record["stopped_at"] = len(samples)
        stopped = len(samples) < settings.n and check is not None
        record["change_probability"] = check.change_probability if stopped and check else 0.0
    if clusters is not None and spec is not None:
        record["clusters"] = clusters_record(clusters, method=spec.method, question=question)
    if lp is not None:
        record["probs"] = [float(p) for p in lp.probs]
        record["logprob"] = {
            "coverage": lp.coverage,
            "requests": lp.requests,
            "unresolved_mass": lp.unresolved_mass,
        }
        if tool_one_pass:  # decided with the greedy completion's call (one_pass_belief)
            record["belief"] = "one_pass"
            record["logprob"]["options"] = lp.option_probs()
    if item.label is None:
        graded = grade_item(task, item, greedy, samples, labels, clusters=clusters)
        record["label"] = graded["label"]
        record["grading"] = graded
    return record


# --------------------------------------------------------------------------------------
# the run


@dataclass
class SamplingReport:
    """What a run did.

    Attributes:
        total: Items in the dataset.
        skipped: Items already in the file (resumed).
        written: Records appended by this run.
        failures: ``(id, message)`` of items that failed (rerun to retry them).
        interrupted: The run stopped early (Ctrl-C or too many failures).
        n_samples: Sampled completions in the records written now (greedy ones not
            counted).
        n_length: Those that ended on the length limit (``finish_reason == "length"``).
        unparsed_reasons: Why the unparsed ones among them were unparsed (see
            :func:`~taskcal_agents.parsing._labels.unparsed_reason`).
    """

    total: int
    skipped: int = 0
    written: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    interrupted: bool = False
    n_samples: int = 0
    n_length: int = 0
    unparsed_reasons: Counter[str] = field(default_factory=Counter)

    def add(self, record: Mapping[str, Any]) -> None:
        """Count a written record's samples, length cuts and unparsed reasons."""
        self.written += 1
        samples = record.get("samples") or []
        self.n_samples += len(samples)
        self.n_length += sum(is_length_cut(m) for m in samples)
        self.unparsed_reasons.update(record.get("unparsed_reasons") or {})

    @property
    def length_share(self) -> float:
        """The share of sampled completions cut by the length limit (0 with none)."""
        return self.n_length / self.n_samples if self.n_samples else 0.0


def sample_header(task: Task, settings: SampleSettings, dataset: str | None) -> dict[str, Any]:
    """The samples file header for *task* and *settings*."""
    return {
        "task": task.model_dump(mode="json"),
        "settings": settings.to_dict(),
        "dataset": dataset,
    }


def check_items(task: Task, items: Iterable[DatasetItem]) -> None:
    """Check that the items' labels are task labels and graded items can be graded.

    Raises:
        ConfigurationError: A label is not a task label, or unlabelled items meet a task
            that is not answer-or-abstain.
    """
    unlabelled = False
    for item in items:
        if item.label is None:
            unlabelled = True
        elif item.label not in task.labels:
            msg = (
                f"item {item.id!r} has label {item.label!r}, which is not one of task "
                f"{task.name!r}'s labels {task.labels!r}; use the task the data was written for."
            )
            raise ConfigurationError(msg)
    if unlabelled:
        task.answer_abstain_labels()


def check_settings(task: Task, settings: SampleSettings) -> None:
    """Check that *settings* fit *task* (one logprob choice per label).

    Raises:
        ConfigurationError: Otherwise.
    """
    if settings.choices is not None and len(settings.choices) != len(task.labels):
        msg = (
            f"SampleSettings parameter 'choices' must give one string per task label "
            f"{task.labels!r}, got {list(settings.choices)!r}."
        )
        raise ConfigurationError(msg)


def run_sampling(
    task: Task,
    items: Sequence[DatasetItem],
    sampler: Sampler,
    store: SamplesStore,
    settings: SampleSettings,
    *,
    concurrency: int = 4,
    max_failures: int = 10,
    on_record: Callable[[dict[str, Any] | None], None] | None = None,
    decider: Decider | None = None,
) -> SamplingReport:
    """Sample every item not yet in *store*, with at most *concurrency* requests in flight.

    Args:
        task: The task (parser, prompt, labels).
        items: The dataset.
        sampler: The model client.
        store: The open samples store (its ``done`` ids are skipped).
        settings: N, temperature, greedy, max_tokens.
        concurrency: Items sampled at once (>= 1).
        max_failures: Stop after this many failed items (the server is probably down).
        on_record: Called after each finished item with its record (``None`` on failure).
        decider: With ``settings.adaptive``: the calibrator's decider the stopping rule
            watches (see :func:`sample_item`).

    Returns:
        The report; failed items are not written, so a rerun retries them.

    Raises:
        ConfigurationError: *concurrency* < 1, or bad item labels (see :func:`check_items`).
    """
    check_int(concurrency, "concurrency", minimum=1, kind="an integer")
    check_items(task, items)
    check_settings(task, settings)
    if settings.adaptive is not None:
        check_adaptive(task, "SampleSettings")
        if decider is None or decider.task.labels != task.labels:
            msg = (
                "run_sampling: SampleSettings.adaptive needs the decider of a calibrator for "
                f"task {task.name!r} (its labels {task.labels!r}); pass decider=... "
                "(`taskcal sample --adaptive EPS --artefact FIT.json`)."
            )
            raise ConfigurationError(msg)
    todo = [item for item in items if item.id not in store.done]
    report = SamplingReport(total=len(items), skipped=len(items) - len(todo))
    pending: dict[Future[dict[str, Any]], str] = {}
    queue = iter(todo)
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="taskcal-sample")

    def refill() -> None:
        while len(pending) < concurrency:
            item = next(queue, None)
            if item is None:
                return
            future = pool.submit(sample_item, task, item, sampler, settings, decider=decider)
            pending[future] = item.id

    try:
        refill()
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                item_id = pending.pop(future)
                try:
                    record = future.result()
                except SamplingError as exc:
                    report.failures.append((item_id, str(exc)))
                    if on_record is not None:
                        on_record(None)
                    continue
                store.append(record)
                report.add(record)
                if on_record is not None:
                    on_record(record)
            if len(report.failures) >= max_failures:
                report.interrupted = True
                break
            refill()
    except KeyboardInterrupt:
        report.interrupted = True
    finally:
        # Do not wait for requests in flight: their items are simply not written.
        pool.shutdown(wait=not report.interrupted, cancel_futures=True)
    return report
