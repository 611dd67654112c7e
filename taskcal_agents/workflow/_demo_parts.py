"""One part of the demo: its items sampled into a resumable file, then evaluated.

:func:`sample_part` samples a part's items as ``taskcal sample`` does (resuming its samples
file); :func:`evaluate_part` evaluates them as ``taskcal evaluate`` does (the workflow's
cross-fitted decoder comparison, with its label-shuffle test) and writes the part's
evaluation file.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from taskcal_agents.datasets import DatasetItem
    from taskcal_agents.decision import Task
    from taskcal_agents.workflow._demo import Observer, StepTimer
    from taskcal_agents.workflow._runner import SampleSettings

__all__ = ["evaluate_part", "sample_part"]


def sample_part(
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
    from taskcal_agents.workflow._runner import ONE_PASS_BELIEFS, run_sampling, sample_header
    from taskcal_agents.workflow._store import SamplesStore

    with SamplesStore.open(path, sample_header(task, settings, dataset)) as store:
        done = sum(item.id in store.done for item in items)
        what = (
            "one-pass beliefs"
            if settings.belief in ONE_PASS_BELIEFS
            else f"{settings.n} samples each"
        )
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


def evaluate_part(
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
    from taskcal_agents.decision import DEFAULT_ALPHA
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
    if key == "tool_use":  # the effect-aware rows: the same samples, decided per effect
        from taskcal_agents.workflow._demo_tasks import DEMO_EFFECTS
        from taskcal_agents.workflow._effect_rows import crossfit_rows

        result["effect_rows"] = crossfit_rows(
            task, samples, effects=DEMO_EFFECTS, folds=folds, permutations=permutations
        )
    evaluation_path = write_json(result, out_dir / f"{key}.evaluation.json")
    return result, evaluation_path
