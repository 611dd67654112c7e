"""``taskcal calibrate``: a tool-decision calibrator for a served model, from public data.

One resumable command: build the train split of the BFCL corpus
(:func:`~taskcal_agents.datasets.convert`, from the ``bfcl-eval`` wheel or its data folder),
sample it on the endpoint under the settings ``calibrator="auto"`` matches
(:mod:`taskcal_agents.decision._shipped`), fit the calibrator with its stopping prior, and
write the artefact with its ``record`` (model, sampling settings, data, command). Killing it
loses nothing: a rerun with the same work folder resumes the samples and refits. The
calibrators shipped for the registry models are this command's output.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from taskcal_agents._files import sha256_file
from taskcal_agents.decision import (
    DEFAULT_ALPHA,
    DEFAULT_N_SAMPLES,
    DEFAULT_TEMPERATURE,
    CalibratorArtefact,
    Task,
)
from taskcal_agents.errors import ConfigurationError, DataFileError
from taskcal_agents.sampling import Sampler
from taskcal_agents.workflow._runner import (
    SampleSettings,
    SamplingReport,
    run_sampling,
    sample_header,
)
from taskcal_agents.workflow._steps import fit_artefact
from taskcal_agents.workflow._store import SamplesStore, read_samples

if TYPE_CHECKING:
    from taskcal_agents.datasets import DatasetItem

__all__ = [
    "CALIBRATE_CALIBRATOR",
    "CALIBRATE_MAX_TOKENS",
    "CalibrateResult",
    "calibrate_endpoint",
    "calibrate_task",
]

CALIBRATE_MAX_TOKENS = 256
"""The completion length limit of the samples (a call, a question or a refusal fits)."""

CALIBRATE_CALIBRATOR = "logistic"
"""The calibrator family fitted: multinomial logistic regression on ln p̂, the extra shares
and the relevance features, its L2 strength cross-validated. Chosen on the corpus's
development split (Qwen2.5-Coder-0.5B, 219 items, 5-fold cross-fitted expected cost): 0.475
with the relevance features against 0.594 without (matrix scaling 0.594, Dirichlet 0.626,
vector scaling 0.566, the best constant 0.667)."""

CALIBRATE_SPLIT = "train"
"""The corpus split fitted on (the development split chose the family; the test split is
locked for the evidence tables)."""

CV_FOLDS = 5
"""Folds of the cross-fitted metrics the artefact records."""

WARMUP_ITEMS = 8
"""Items sampled and timed first; the expected duration is printed from their pace."""


def calibrate_task() -> Task:
    """The task the calibrator is fitted for: the BFCL corpus's default task.

    :func:`~taskcal_agents.decision.tool_decision` with its default prompt and
    grounding, When2Call's costs (which the calibrator does not depend on), named ``bfcl``.
    """
    from taskcal_agents.datasets import default_task

    return default_task("bfcl")


@dataclass(frozen=True)
class CalibrateResult:
    """What :func:`calibrate_endpoint` did.

    Attributes:
        artefact: The artefact written (``None`` when sampling did not finish).
        path: Where it was written.
        samples: The samples file.
        report: The sampling run's report (its failures are retried by a rerun).
    """

    artefact: CalibratorArtefact | None
    path: Path
    samples: Path
    report: SamplingReport


def calibrate_endpoint(
    sampler: Sampler,
    *,
    model: str,
    source: str | os.PathLike[str],
    work_dir: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    base_url: str | None = None,
    n: int = DEFAULT_N_SAMPLES,
    temperature: float = DEFAULT_TEMPERATURE,
    max_tokens: int = CALIBRATE_MAX_TOKENS,
    calibrator: str = CALIBRATE_CALIBRATOR,
    concurrency: int = 4,
    max_failures: int = 10,
    limit: int | None = None,
    dtype: str | None = None,
    belief: Literal["samples", "one_pass"] = "samples",
    command: str | None = None,
    on_estimate: Callable[[float, int], None] | None = None,
    on_record: Callable[[dict[str, Any] | None], None] | None = None,
) -> CalibrateResult:
    """Sample the corpus's train split on ``sampler`` and fit a shipped-style calibrator.

    Args:
        sampler: The model client (its server serves ``model``).
        model: The served model's name (recorded, and matched by ``calibrator="auto"``).
        source: The ``bfcl-eval`` wheel or its data folder.
        work_dir: Holds the split (``bfcl.train.jsonl``) and the samples (``samples.jsonl``;
            ``samples.one_pass.jsonl`` for the one-pass belief;
            resumed by a rerun).
        out: The artefact file (default ``work_dir/calibrator.json``).
        base_url: The server URL (recorded in the samples only).
        n: Completions per item (the front doors' N must match).
        temperature: Their temperature (the front doors' must match).
        max_tokens: Their length limit (a front door's may be longer or unset).
        calibrator: The calibrator spec (as for ``taskcal fit``).
        concurrency: Items sampled at once.
        max_failures: Stop after this many failed items.
        limit: Only the first items of the split (a trial run; recorded).
        dtype: The dtype the model is served in (recorded, not matched), or ``None``.
        belief: ``"samples"``: N completions per item; ``"one_pass"``: the one-pass belief
            (one forward pass over the tool options and one greedy completion per item), for
            front doors with ``SamplingOptions(belief="one_pass")``; ``n`` is then not used.
        command: The command line (recorded).
        on_estimate: Called once with the expected seconds left and the items left, after
            the first :data:`WARMUP_ITEMS` items were timed.
        on_record: Called after each finished item (``None`` on failure).

    Returns:
        The result; ``artefact`` is ``None`` when items failed or the run was interrupted
        (rerun to resume).

    Raises:
        ConfigurationError: Bad settings.
        DataFileError: The source cannot be read, or the samples file was written with
            other settings.
    """
    from taskcal_agents.datasets import convert, write_dataset

    if belief == "one_pass" and not temperature > 0:
        msg = (
            f"calibrate: the one-pass belief is read at the temperature, which must be > 0, got "
            f"{temperature!r}."
        )
        raise ConfigurationError(msg)
    folder = Path(work_dir)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "calibrator.json" if out is None else Path(out)
    task = calibrate_task()
    items = convert("bfcl", source, split=CALIBRATE_SPLIT)
    if limit is not None:
        if limit < 1:
            msg = f"calibrate: limit must be >= 1, got {limit}."
            raise ConfigurationError(msg)
        items = items[:limit]
    data = folder / f"bfcl.{CALIBRATE_SPLIT}.jsonl"
    samples = folder / ("samples.jsonl" if belief == "samples" else "samples.one_pass.jsonl")
    digest = _items_digest(items)
    if samples.exists():
        drawn_for = read_samples(samples).header.get("items_sha256")
        if drawn_for is not None and drawn_for != digest:
            msg = (
                "the samples in this work folder were drawn for other items (another --limit "
                "or --source); use another --work-dir."
            )
            raise DataFileError(msg, path=str(samples))
    write_dataset(items, data)
    settings = SampleSettings(
        n=n, temperature=temperature, greedy=belief == "one_pass", max_tokens=max_tokens,
        model=model, base_url=base_url, belief=belief,
    )  # fmt: skip
    header = {**sample_header(task, settings, data.name), "items_sha256": digest}
    store = SamplesStore.open(samples, header)
    with store:
        todo = [i for i in items if i.id not in store.done]
        already = len(items) - len(todo)
        head, rest = todo[:WARMUP_ITEMS], todo[WARMUP_ITEMS:]
        run = {"concurrency": concurrency, "max_failures": max_failures, "on_record": on_record}
        start = time.monotonic()
        report = run_sampling(task, head, sampler, store, settings, **run)  # type: ignore[arg-type]
        if rest and not report.interrupted:
            if on_estimate is not None and report.written:
                per_item = (time.monotonic() - start) / len(head)
                on_estimate(per_item * len(rest), len(rest))
            more = run_sampling(task, rest, sampler, store, settings, **run)  # type: ignore[arg-type]
            report = _merged(report, more)
        report.total, report.skipped = len(items), already
    if report.failures or report.interrupted:
        return CalibrateResult(None, target, samples, report)
    folds = CV_FOLDS if len(items) >= 5 * CV_FOLDS else 0  # a trial run: no cross-fit
    fitted, _ = fit_artefact(  # this task's belief, whatever task the samples were drawn for
        samples, calibrator=calibrator, task=task, alpha=DEFAULT_ALPHA, cv_folds=folds, data=data
    )
    artefact = CalibratorArtefact.from_dict(fitted)
    src = Path(source)
    artefact.metadata["record"] = {
        "model": model,
        "sampling": {
            "task": task.name, "n": n, "temperature": temperature, "max_tokens": max_tokens,
            "prompt": task.prompt, "dtype": dtype, "belief": belief,
        },
        "data": {
            "corpus": "bfcl", "source": src.name,
            "source_sha256": sha256_file(src) if src.is_file() else None,
            "split": CALIBRATE_SPLIT, "n_items": len(items),
            "items_sha256": digest,
        },
        "command": command,
        "taskcal_version": _version(),
    }  # fmt: skip
    artefact.metadata["samples"] = {**artefact.metadata.get("samples", {}), "path": samples.name}
    artefact.save(target)
    return CalibrateResult(artefact, target, samples, report)


def _items_digest(items: Sequence[DatasetItem]) -> str:
    """The sha256 of the items' JSON lines: what the samples were drawn for."""
    h = hashlib.sha256()
    for item in items:
        h.update(item.model_dump_json().encode("utf-8") + b"\n")
    return h.hexdigest()


def _merged(a: SamplingReport, b: SamplingReport) -> SamplingReport:
    """The report of two runs over the two parts of one split (totals set by the caller)."""
    merged = SamplingReport(
        total=a.total + b.total,
        written=a.written + b.written,
        failures=[*a.failures, *b.failures],
        interrupted=a.interrupted or b.interrupted,
        n_samples=a.n_samples + b.n_samples,
        n_length=a.n_length + b.n_length,
    )
    merged.unparsed_reasons.update(a.unparsed_reasons)
    merged.unparsed_reasons.update(b.unparsed_reasons)
    return merged


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("taskcal-agents")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "unknown"
