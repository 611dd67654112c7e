"""What both Ray engines share: Ray itself, the draws' error column, and the run loop.

The HTTP engine (:mod:`~taskcal_agents.workflow._ray_engine`) and the in-Ray vLLM engine
(:mod:`~taskcal_agents.workflow._ray_vllm`) each build a Ray Data pipeline whose rows are
draws (an item's N samples, or its greedy completion) labelled by the task's g_T. This
module runs such a pipeline (:func:`run_pipeline`): it joins or starts Ray
(:func:`ray_session`), streams the returned blocks, gathers each item's draws into the
local engine's record (:class:`DrawCollector`) and appends the records of each block in
one write (:func:`collect`); a rerun skips the ids already in the file.

* A row function that fails marks its row in :data:`ERROR_COLUMN` (the row skips the later
  stages and its item is reported failed), so a poison item fails alone.
* Up to ``max_errored_blocks`` failed blocks are dropped (Ray Data's
  ``max_errored_blocks``): their items are reported failed, the job goes on, and a rerun
  retries them.

``ray`` is imported only when an engine runs (``pip install 'taskcal-agents[ray]'``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from taskcal_agents._validation import check_int
from taskcal_agents.datasets import DatasetItem
from taskcal_agents.errors import ConfigurationError, SamplingError
from taskcal_agents.workflow._runner import (
    SampleSettings,
    SamplingReport,
    check_items,
    check_settings,
    message_from_dict,
    sample_item,
)
from taskcal_agents.workflow._store import SamplesStore

if TYPE_CHECKING:
    from langchain_core.messages import AIMessage

    from taskcal_agents.decision import Task

__all__ = [
    "ERROR_COLUMN",
    "OK",
    "RAY_INSTALL_HINT",
    "DrawCollector",
    "blocks_dataset",
    "check_ray_settings",
    "collect",
    "import_ray",
    "items_to_sample",
    "ray_session",
    "run_pipeline",
]

RAY_INSTALL_HINT = "pip install 'taskcal-agents[ray]'"
"""How to get the Ray engine's dependencies (``ray[data]`` and aiohttp)."""

ERROR_COLUMN = "__inference_error__"
"""Ray's error column: a row whose value is not ``""`` skips the later stages.

Every row function sets it, ``""`` on success: Arrow gives a block's rows the union of their
keys, so a success row beside a failed one would otherwise carry ``None``, and Ray reads
``None != ""`` as failed (a poison row would take its block's neighbours with it)."""


OK = {ERROR_COLUMN: ""}
"""What a row function adds on success (see :data:`ERROR_COLUMN`)."""


def import_ray() -> Any:
    """Import ``ray`` with Ray Data's LLM processors, or say how to install them.

    Raises:
        ImportError: Ray (or aiohttp, which the HTTP processor needs) is not installed.
    """
    try:
        import aiohttp  # noqa: F401  (the HTTP processor's client)
        import ray
        import ray.data.llm
    except ImportError as exc:
        msg = (
            f"the Ray engine needs ray[data] and aiohttp ({exc}); install them with "
            f"`{RAY_INSTALL_HINT}`."
        )
        raise ImportError(msg) from exc
    return ray


def check_ray_settings(task: Task, settings: SampleSettings) -> None:
    """Refuse what the Ray engine does not do (it posts two fixed requests per item).

    Raises:
        ConfigurationError: the one-pass belief, adaptive N, or entailment clustering
            (each needs requests that depend on earlier answers).
    """
    refused = []
    if settings.belief != "samples":
        refused.append(f"belief={settings.belief!r}")
    if settings.adaptive is not None:
        refused.append("adaptive N")
    if task.answer_clusters is not None and task.answer_clusters.method == "entailment":
        refused.append("answer clustering by entailment (the sampler judges)")
    if refused:
        msg = (
            f"the Ray engine posts the N samples and the greedy draw of each item as fixed "
            f"requests; it does not do {', '.join(refused)}: use --engine local."
        )
        raise ConfigurationError(msg)


def items_to_sample(
    task: Task, items: Sequence[DatasetItem], store: SamplesStore, settings: SampleSettings
) -> list[DatasetItem]:
    """The items not yet in *store*, after checking them and the settings for a Ray engine.

    Raises:
        ConfigurationError: Bad item labels or settings the Ray engines do not do.
    """
    check_items(task, items)
    check_settings(task, settings)
    check_ray_settings(task, settings)
    return [item for item in items if item.id not in store.done]


class _Replay:
    """A sampler that hands back completions already drawn (samples, then greedy)."""

    def __init__(self, draws: Sequence[list[AIMessage]]) -> None:
        self._draws = list(draws)

    def sample(self, messages: Any, **params: Any) -> list[AIMessage]:
        if not self._draws:
            msg = "the Ray engine drew no more completions for this item."
            raise SamplingError(msg)
        return self._draws.pop(0)


class DrawCollector:
    """Gathers the draws of each item as Ray returns them; finished items become records.

    Rows of kind ``samples`` are concatenated in draw order (one row with all N choices
    from the HTTP engine, N rows of one choice from the in-Ray vLLM engine); the ``greedy``
    row is the greedy completion. The record is built by
    :func:`~taskcal_agents.workflow._runner.sample_item` replayed over the draws, the path
    the local engine takes (grading, clusters), with the labels the postprocess parsed.
    """

    def __init__(
        self,
        task: Task,
        settings: SampleSettings,
        items: Sequence[DatasetItem],
        draws_per_item: int,
    ) -> None:
        self.task = task
        self.settings = settings
        self.items = {item.id: item for item in items}
        self.draws_per_item = draws_per_item
        self._rows: dict[str, dict[int, dict[str, Any]]] = {}
        self.failed: dict[str, str] = {}

    @property
    def pending(self) -> list[str]:
        """Ids with neither a record nor a failure yet, in input order."""
        return [i for i in self.items if i not in self.failed]

    def add(self, row: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
        """Take one returned row.

        Returns:
            ``(record, None)`` once its item is complete, ``(None, message)`` when the item
            failed now, else ``(None, None)``.
        """
        rid = row.get("id")
        if not isinstance(rid, str) or rid not in self.items or rid in self.failed:
            return None, None
        error = row.get(ERROR_COLUMN)
        if not error and not isinstance(row.get("messages"), str):
            error = "Ray returned the draw without its completions"
        if error:
            self.failed[rid] = f"item {rid!r}: {error}"
            self._rows.pop(rid, None)
            return None, self.failed[rid]
        got = self._rows.setdefault(rid, {})
        got[int(row["draw"])] = dict(row)
        if len(got) < self.draws_per_item:
            return None, None
        del self._rows[rid]
        item = self.items.pop(rid)
        try:
            return self._record(item, [got[j] for j in sorted(got)]), None
        except Exception as exc:
            self.failed[rid] = f"item {rid!r}: {type(exc).__name__}: {exc}"
            return None, self.failed[rid]

    def _record(self, item: DatasetItem, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        samples: list[AIMessage] = []
        greedy: list[AIMessage] = []
        labels: list[str | None] = []
        greedy_labels: list[str | None] = []
        for row in rows:
            messages = [message_from_dict(d) for d in json.loads(row["messages"])]
            parsed = json.loads(row["labels"])
            if len(parsed) != len(messages):
                msg = f"{len(parsed)} labels for {len(messages)} completions"
                raise SamplingError(msg)
            is_greedy = row["kind"] == "greedy"
            (greedy if is_greedy else samples).extend(messages)
            (greedy_labels if is_greedy else labels).extend(parsed)
        draws = [samples, greedy] if self.settings.greedy else [samples]
        return sample_item(
            self.task,
            item,
            _Replay(draws),  # type: ignore[arg-type]
            self.settings,
            parsed=(labels, greedy_labels[0] if greedy_labels else None),
        )


def blocks_dataset(ray: Any, rows: Sequence[Mapping[str, Any]], batch_size: int) -> Any:
    """*rows* as a Ray dataset of blocks of exactly *batch_size* rows (the last: the rest).

    The actor pool bundles blocks up to ``batch_size`` rows; ``from_items`` splits rows
    evenly instead, and uneven blocks would be bundled two to a batch (a failed batch would
    then lose more than ``batch_size`` rows).
    """
    import pyarrow as pa

    chunks = [rows[k : k + batch_size] for k in range(0, len(rows), batch_size)]
    return ray.data.from_arrow([pa.Table.from_pylist(list(chunk)) for chunk in chunks])


def _result_rows(ds: Any) -> Generator[list[dict[str, Any]], None, None]:
    """The rows of each block as Ray returns it (streaming)."""
    for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
        yield batch.to_pylist()


def collect(
    rows: Iterator[list[dict[str, Any]]],
    collector: DrawCollector,
    store: SamplesStore,
    report: SamplingReport,
    on_record: Callable[[dict[str, Any] | None], None] | None = None,
    max_failures: int | None = None,
) -> bool:
    """Append the records each returned block finishes, in one write per block.

    Returns:
        Whether it stopped early: *max_failures* items had failed (the rows not yet read
        are left; closing the iterator stops the Ray job).
    """
    for block in rows:
        records = []
        for row in block:
            record, failure = collector.add(row)
            if record is not None:
                records.append(record)
            elif failure is not None:
                report.failures.append((str(row["id"]), failure))
                if on_record is not None:
                    on_record(None)
        store.append_many(records)
        for record in records:
            report.add(record)
            if on_record is not None:
                on_record(record)
        if max_failures is not None and len(report.failures) >= max_failures:
            return True
    return False


def ray_session(address: str | None) -> tuple[Any, bool]:
    """Ray, joined to *address* (or the running instance, or a new local one).

    Returns:
        ``(ray, started)``: ``started`` when this call started Ray (the caller shuts it down).
    """
    ray = import_ray()
    if ray.is_initialized():
        return ray, False
    ray.init(address=address, include_dashboard=False, log_to_driver=False)
    return ray, True


def run_pipeline(
    build: Callable[[], Any],
    collector: DrawCollector,
    store: SamplesStore,
    total: int,
    *,
    address: str | None,
    max_failures: int,
    max_errored_blocks: int,
    on_record: Callable[[dict[str, Any] | None], None] | None = None,
) -> SamplingReport:
    """Run a Ray pipeline of draws (``build()``) and append what *collector* finishes.

    Shared by the HTTP engine and the in-Ray vLLM engine: the collector holds the items to
    sample (those not yet in *store*); Ray is joined at *address* (or started, and then
    shut down); up to *max_errored_blocks* failed blocks are dropped (their items are
    reported failed at the end), and the job stops after *max_failures* failed items.
    After an interrupt or a stopped job the items not returned are not listed one by one.
    """
    check_int(max_failures, "max_failures", minimum=1)
    check_int(max_errored_blocks, "max_errored_blocks", minimum=1)
    report = SamplingReport(total=total, skipped=total - len(collector.pending))
    if not collector.pending:
        return report
    ray, started = ray_session(address)
    context = ray.data.DataContext.get_current()
    saved = (context.max_errored_blocks, context.enable_progress_bars)
    context.max_errored_blocks = max_errored_blocks
    context.enable_progress_bars = False
    completed = False
    try:
        rows = _result_rows(build())
        try:
            stopped = collect(rows, collector, store, report, on_record, max_failures)
        finally:
            rows.close()  # stops the Ray job when it stopped early
        report.interrupted = stopped
        completed = not stopped
    except KeyboardInterrupt:
        report.interrupted = True
    except Exception as exc:  # the job stopped: more failed blocks than max_errored_blocks
        report.interrupted = True
        message = (
            f"the Ray job stopped ({len(collector.pending)} items not sampled): "
            f"{type(exc).__name__}: {exc}"
        )
        report.failures.append(("(ray job)", message))
    finally:
        context.max_errored_blocks, context.enable_progress_bars = saved
        if started:
            ray.shutdown()
    if not completed:  # as the local engine: the items not yet returned are not written
        return report
    lost = "Ray returned no result (its batch failed after retries; see the Ray logs)"
    for rid in collector.pending:
        report.failures.append((rid, f"item {rid!r}: {lost}"))
        if on_record is not None:
            on_record(None)
    return report
