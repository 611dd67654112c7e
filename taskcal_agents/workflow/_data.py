"""From a samples file to the arrays the fit and the evaluation work on."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
from langchain_core.messages import AIMessage

from taskcal_agents.datasets import DatasetItem, call_matches_answer, read_dataset
from taskcal_agents.decision import (
    DEFAULT_ALPHA,
    Belief,
    Decider,
    Task,
    carried_actions,
    ground_samples,
    grounded_flags,
    item_relevance,
    outcome_counts,
    raw_inputs,
    read_one_pass,
    trusted_flags,
    ungrounded_flags,
)
from taskcal_agents.errors import ConfigurationError, DataFileError, LabelMismatchError
from taskcal_agents.parsing import (
    AnswerClusters,
    GroundingContext,
    cluster_samples,
    clusters_from_record,
    modal_labels,
    sample_answers,
)
from taskcal_agents.workflow._eval_arrays import EvalArrays
from taskcal_agents.workflow._grading import grading
from taskcal_agents.workflow._runner import message_from_dict
from taskcal_agents.workflow._store import SamplesFile, read_samples


def resolve_task(samples: SamplesFile, task: Task | str | os.PathLike[str] | None) -> Task:
    """The task to evaluate *samples* with.

    That is *task* if given (it must have the same name and labels as the task the samples
    were drawn for; its costs may differ), else the sampling task stored in the header.

    Raises:
        DataFileError: The header holds no valid task.
        LabelMismatchError: *task* differs from the sampling task in name or labels.
    """
    stored = samples.task
    if task is None:
        try:
            return Task.model_validate(stored)
        except ValueError as exc:
            msg = f"header holds no valid task ({exc}); pass --task."
            raise DataFileError(msg, path=str(samples.path), line=1) from exc
    if not isinstance(task, Task):
        task = Task.from_file(task)
    if stored.get("name") != task.name or stored.get("labels") != task.labels:
        msg = (
            f"samples file {samples.path} was written for task {stored.get('name')!r} with "
            f"labels {stored.get('labels')!r}, not for task {task.name!r} with labels "
            f"{task.labels!r}; pass the task the samples were drawn for."
        )
        raise LabelMismatchError(msg, expected=task.labels, got=list(stored.get("labels") or []))
    return task


def record_clusters(
    task: Task,
    record: Mapping[str, Any],
    messages: Sequence[AIMessage],
    labels: Sequence[str | None],
    *,
    reparse: bool = False,
) -> tuple[AnswerClusters | None, list[str | None]]:
    """The clusters of a record's samples and their labels under clustering.

    Method ``lexical`` clusters the stored completions again
    (:func:`~taskcal_agents.parsing._answer_clusters.cluster_samples`, with the question stored in
    the record's ``clusters``, or none for records sampled without clustering), so the
    task's options apply to old files too; method ``entailment`` reads the clusters the
    served judge made at sampling time.

    Args:
        task: A task with ``answer_clusters``.
        record: The samples-file record.
        messages: Its completions.
        labels: Their parsed labels.
        reparse: The labels were parsed again (the stored entailment clusters may not fit).

    Raises:
        ConfigurationError: Method ``entailment`` without stored entailment clusters (they
            need the server), or stored clusters that do not fit the samples.
    """
    spec = task.answer_clusters
    stored = record.get("clusters")
    stored = stored if isinstance(stored, Mapping) else {}
    if spec is None or spec.method == "lexical":
        question = stored.get("question")
        return cluster_samples(
            task, messages, labels, question=question if isinstance(question, str) else None
        )
    if reparse or stored.get("method") != "entailment":
        why = "--reparse changes the answers" if reparse else "the record has none"
        msg = (
            f"record {record.get('id')!r}: answer_clusters method 'entailment' reads the "
            f"clusters the served judge made at sampling time, but {why}; sample again with "
            "`taskcal sample` (the judge needs the server) or evaluate with method 'lexical'."
        )
        raise ConfigurationError(msg)
    if not messages:
        return None, []
    clusters = clusters_from_record(stored, sample_answers(task, messages, labels))
    return clusters, modal_labels(task, clusters, labels)


def dataset_items(
    samples: SamplesFile, data: str | os.PathLike[str] | None = None
) -> dict[str, DatasetItem]:
    """The items a samples file was drawn from, by id.

    *data* if given, else the dataset named in the header (as written, else beside the
    samples file).

    Raises:
        DataFileError: No dataset is named, or it cannot be read.
    """
    path = Path(data) if data is not None else None
    if path is None:
        named = samples.header.get("dataset")
        if not isinstance(named, str) or not named:
            msg = (
                "the samples file names no dataset, and grounding the tool calls needs each "
                "item's conversation; pass --data DATA.jsonl (the file it was sampled from)."
            )
            raise DataFileError(msg, path=str(samples.path), line=1)
        path = Path(named)
        if not path.exists() and (samples.path.parent / path.name).exists():
            path = samples.path.parent / path.name
    return {item.id: item for item in read_dataset(path)}


def record_context(
    record: Mapping[str, Any], items: Mapping[str, DatasetItem] | None, *, source: str
) -> GroundingContext:
    """What a record's calls are grounded in: its tools and its item's conversation.

    The tools and messages the record stores (``tools``, ``messages``: the item's own,
    never the task prompt, as at sampling time,
    :func:`~taskcal_agents.workflow._runner.item_context`); a record written before they
    were stored takes them from its item in *items*.

    Raises:
        DataFileError: The record stores no conversation and its item is not in *items*.
    """
    tools, messages = record.get("tools"), record.get("messages")
    if isinstance(messages, list) and isinstance(tools, list):
        return GroundingContext(tools, messages)
    item = None if items is None else items.get(str(record.get("id")))
    if item is None:
        msg = (
            f"record {record.get('id')!r} stores no conversation, and grounding its tool calls "
            "needs it; pass --data with the dataset it was sampled from."
        )
        raise DataFileError(msg, path=source)
    return GroundingContext(
        tools if isinstance(tools, list) else item.tools,
        messages if isinstance(messages, list) else item.messages,
    )


def task_summary(task: Task) -> dict[str, object]:
    """The task block of an evaluation file: name, labels, actions, cost and fallback action."""
    return {
        "name": task.name,
        "labels": list(task.labels),
        "actions": list(task.action_list),
        "cost": task.cost_matrix().tolist(),
        "fallback_action": task.default_action,
    }


def eval_arrays(
    task: Task,
    samples: SamplesFile,
    *,
    alpha: float = DEFAULT_ALPHA,
    reparse: bool = False,
    ids: Sequence[str] | None = None,
    items: Mapping[str, DatasetItem] | None = None,
) -> EvalArrays:
    """Build :class:`EvalArrays` from a samples file.

    Args:
        task: The task (labels, costs, parser, unparsed policy, fallback action).
        samples: The samples file.
        alpha: The Dirichlet smoothing prior of the beliefs (use the deployed value).
        reparse: Parse the stored completions again with *task*'s parser instead of using
            the stored labels (after changing parser options).
        ids: Restrict to these ids, in this order (default: all, sorted by id, so that the
            folds do not depend on the order in which concurrent sampling finished).
        items: The dataset's items by id, for a task that grounds its calls (each record's
            conversation; default: :func:`dataset_items` of the header's dataset).

    Returns:
        The arrays; ``executable`` says per item which actions its stored samples can
        carry out (:func:`~taskcal_agents.decision.carried_actions`, the runtime's rule;
        a one-pass logprob record has no sample, so no sampled action is executable).
        Under the task's ``unparsed: other`` policy also the calibrator inputs ``X``
        (n, k + 1), each belief's :attr:`~taskcal_agents.decision.Belief.features`. For a
        task with ``answer_clusters`` the beliefs are those of the samples' clusters
        (:func:`record_clusters`), ``n_clusters`` holds the number of clusters per item,
        and a graded record's label is the grade of its modal answer against the stored
        references (records sampled without clustering are re-graded so). For a task with
        ``grounding`` each record's calls are grounded in its item's conversation
        (:func:`record_context`) and enter the beliefs and ``executable`` as the
        :class:`~taskcal_agents.decision.Decider` reads them; ``executable_any`` says what
        could be carried out if any call could be sent, and ``no_tools`` marks the items
        offered no tools.

    Raises:
        DataFileError: No records, or a record with a missing or unknown label (naming the
            file and line).
    """
    records = (
        [samples.records[i] for i in sorted(samples.records)]
        if ids is None
        else [samples.records[i] for i in ids if i in samples.records]
    )
    if not records:
        msg = "samples file holds no finished records; run `taskcal sample` first."
        raise DataFileError(msg, path=str(samples.path))
    k = len(task.labels)
    P = np.empty((len(records), k))
    X = np.empty((len(records), task.n_features)) if task.n_features > k else None
    inputs = np.empty((len(records), task.n_inputs)) if task.reads_relevance else None
    grounding = task.grounding
    if (
        grounding is not None
        and items is None
        and any(
            not isinstance(r.get("messages"), list) or not isinstance(r.get("tools"), list)
            for r in records
        )
    ):
        items = dataset_items(samples)  # records written before they stored the conversation
    sends_grounded = grounding is not None and grounding.execute == "grounded"
    answers = _possible_answers(items) if task.call_action is not None else {}
    call_correct = np.full(len(records), np.nan) if answers else None
    decider = Decider(task) if answers else None
    foreign: str | None = None  # a record whose dataset item holds another conversation
    executable_any = np.ones((len(records), len(task.action_list)), dtype=bool)
    is_tool_task = task.call_action in task.labels
    no_tools = np.zeros(len(records), dtype=bool)
    y = np.empty(len(records), dtype=np.intp)
    greedy = np.full(len(records), -1, dtype=np.intp)
    no_sample = np.zeros(len(records), dtype=bool)
    executable = np.ones((len(records), len(task.action_list)), dtype=bool)
    n_clusters = np.zeros(len(records), dtype=np.intp) if task.answer_clusters is not None else None
    counts = (
        np.zeros((len(records), len(task.outcomes) + 1), dtype=np.int64)
        if task.answer_clusters is None
        else None
    )
    for i, record in enumerate(records):
        line = samples.lines.get(record["id"])
        groundings = None
        relevance = None
        try:
            messages = [message_from_dict(m) for m in record.get("samples", [])]
        except (AttributeError, KeyError, TypeError, ValueError) as exc:  # incl. pydantic
            msg = f"record {record['id']!r} field 'samples' holds an invalid message: {exc}"
            raise DataFileError(msg, path=str(samples.path), line=line) from exc
        # The item's offered tools when the record has them (older records: any tool).
        offered = record.get("tool_names")
        if reparse:
            labels = [task.parse_completion(m, tool_names=offered) for m in messages]
            g = record.get("greedy")
            g_label = task.parse_completion(message_from_dict(g), tool_names=offered) if g else None
        else:
            labels = list(record.get("labels") or [])
            g_label = record.get("greedy_label")
        true = record.get("label")
        checks: list[tuple[str, Any]] = [("sample label", x) for x in labels if x is not None]
        checks += [("greedy_label", g_label)] if g_label is not None else []
        checks += [("label", true)]
        for what, value in checks:
            if value not in task.labels:
                msg = (
                    f"record {record['id']!r} has {what} {value!r}, which is not one of task "
                    f"{task.name!r}'s labels {task.labels!r}; evaluate with the sampling task."
                )
                raise DataFileError(msg, path=str(samples.path), line=line)
        if n_clusters is not None and "probs" not in record:
            if len(labels) != len(messages):
                msg = (
                    f"record {record['id']!r} has {len(labels)} labels for "
                    f"{len(messages)} samples; answer clusters need the completions."
                )
                raise DataFileError(msg, path=str(samples.path), line=line)
            try:
                clusters, labels = record_clusters(task, record, messages, labels, reparse=reparse)
            except ConfigurationError as exc:
                raise DataFileError(str(exc), path=str(samples.path), line=line) from exc
            n_clusters[i] = 0 if clusters is None else clusters.n_clusters
            references = (record.get("grading") or {}).get("references")
            if isinstance(references, list):  # a graded item: grade the modal answer
                modal = None if clusters is None else clusters.modal_answer
                true = grading(task, modal, "modal_cluster", references)["label"]
        if record.get("belief") == "one_pass":
            # A tool decision's one-pass belief; its greedy completion is the one sample.
            g = record.get("greedy")
            messages = [message_from_dict(g)] if g else []
            labels = [g_label] if g else []
            context = (
                None
                if grounding is None
                else record_context(record, items, source=str(samples.path))
            )
            groundings = ground_samples(task, messages, context)
            try:
                belief, relevance = read_one_pass(
                    task, record["probs"], messages, labels, groundings, context, alpha=alpha
                )
            except ConfigurationError as exc:
                raise DataFileError(str(exc), path=str(samples.path), line=line) from exc
        elif "probs" in record:  # one-pass logprob belief: n pseudo-samples of these probs
            probs = np.asarray(record["probs"], dtype=np.float64)
            if probs.shape != (len(task.labels),) or not (np.all(probs >= 0) and probs.sum() > 0):
                msg = (
                    f"record {record['id']!r} has probs {record['probs']!r}; expected "
                    f"{len(task.labels)} non-negative numbers with a positive sum, one per "
                    f"label of task "
                    f"{task.name!r}."
                )
                raise DataFileError(msg, path=str(samples.path), line=line)
            n_pseudo = int(samples.settings.get("n") or 16)
            belief = Belief(
                probs / probs.sum() * n_pseudo,
                task.labels,
                n=n_pseudo,
                alpha=alpha,
                unparsed_evidence=task.unparsed_evidence,
                split_label=task.call_action if task.splits_ungrounded else None,
            )
        elif grounding is not None and len(labels) == len(messages):
            context = record_context(record, items, source=str(samples.path))
            groundings = ground_samples(task, messages, context)
            relevance = item_relevance(task, messages, labels, context, groundings)
            outcomes = task.sample_outcomes(labels, ungrounded_flags(groundings))
            belief = task.belief_from_outcomes(outcomes, alpha=alpha)
            if counts is not None:
                counts[i] = outcome_counts(task, outcomes)
        else:  # no grounding, or labels without their messages (no call to ground)
            belief = task.belief_from_outcomes(labels, alpha=alpha)
            if counts is not None:
                counts[i] = outcome_counts(task, labels)
        if is_tool_task:
            no_tools[i] = not record.get("tool_names") and not record.get("tools")
        P[i] = belief.probs
        if X is not None:
            X[i] = belief.features
        if inputs is not None:
            if relevance is None:  # a one-pass record, or labels without their samples
                msg = (
                    f"record {record['id']!r} has no sampled completions with their labels "
                    f"(a one-pass belief, or an old record), but task {task.name!r} reads "
                    "the relevance features, which need them; sample N completions, or "
                    "evaluate with grounding.relevance off."
                )
                raise DataFileError(msg, path=str(samples.path), line=line)
            inputs[i] = raw_inputs(task, belief, relevance)
        no_sample[i] = belief.n_parsed == 0
        if len(labels) == len(messages):
            flags = grounded_flags(groundings) if grounding is not None else None
            executable[i] = carried_actions(
                task, messages, labels, tool_names=offered, grounded=flags,
                trusted=trusted_flags(groundings),
            )  # fmt: skip
            if sends_grounded:
                executable_any[i] = carried_actions(
                    task, messages, labels, tool_names=offered, grounded=[True] * len(messages)
                )
            else:
                executable_any[i] = executable[i]
        else:  # labels without their messages: nothing sampled can be carried out
            executable[i] = carried_actions(task, [], [])
            executable_any[i] = executable[i]
        answer = None if foreign else answers.get(record["id"])
        if (
            decider is not None
            and call_correct is not None
            and answer is not None
            and len(labels) == len(messages)
            and executable[i, task.action_index(str(task.call_action))]
        ):
            item = cast(Mapping[str, DatasetItem], items)[record["id"]]
            stored = record.get("messages")
            if isinstance(stored, list) and stored != item.messages:
                foreign = str(record["id"])  # another dataset: score no call (warned below)
            else:
                sent = decider.representative(
                    str(task.call_action),
                    messages,
                    labels,
                    tool_names=offered,
                    groundings=groundings,
                )
                tools = record.get("tools")
                call_correct[i] = _call_correct(
                    sent, answer, tools if isinstance(tools, list) else item.tools
                )
        y[i] = task.label_index(cast(str, true))  # checked above, or a grade: a task label
        if g_label is not None:
            greedy[i] = task.label_index(g_label)
        elif task.unparsed_as is not None and record.get("greedy") is not None:
            greedy[i] = task.label_index(task.unparsed_as)
    if foreign is not None:
        warnings.warn(
            f"record {foreign!r} of {samples.path} was sampled from another conversation than "
            "the dataset item of that id, so no call is scored against the dataset's possible "
            "answers (executed_call_correct is left out); pass --data with the dataset it was "
            "sampled from.",
            stacklevel=2,
        )
        call_correct = None
    return EvalArrays(
        P=P,
        y=y,
        cost=np.asarray(task.cost_matrix(), dtype=np.float64),
        labels=tuple(task.labels),
        actions=tuple(task.action_list),
        greedy=greedy,
        no_sample=no_sample,
        fallback=task.action_index(task.default_action),
        ids=tuple(r["id"] for r in records),
        executable=executable,
        X=X,
        n_clusters=n_clusters,
        has_greedy=bool(samples.settings.get("greedy", True)) and task.answer_clusters is None,
        executable_any=executable_any if sends_grounded else None,
        no_tools=no_tools if is_tool_task else None,
        counts=counts,
        inputs=inputs,
        call_correct=call_correct,
        call_action=task.call_action,
    )


def _named_items(
    samples: SamplesFile, data: str | os.PathLike[str] | None
) -> dict[str, DatasetItem] | None:
    """The items of :func:`dataset_items`, or ``None`` when no readable dataset is named."""
    if data is not None:
        return dataset_items(samples, data)
    named = samples.header.get("dataset")
    if not isinstance(named, str) or not named:
        return None
    path = Path(named)
    if not path.exists() and not (samples.path.parent / path.name).exists():
        return None
    return dataset_items(samples, data)


def _possible_answers(items: Mapping[str, DatasetItem] | None) -> dict[str, Any]:
    """BFCL's possible answers (``meta["possible_answer"]``) of the items that have one."""
    return {
        item_id: item.meta["possible_answer"]
        for item_id, item in (items or {}).items()
        if isinstance(item.meta.get("possible_answer"), Mapping)
    }


def _call_correct(sent: AIMessage | None, answer: Mapping[str, Any], tools: Any) -> float:
    """1.0 when the executed message makes exactly one call and BFCL accepts it, else 0.0."""
    calls = list(sent.tool_calls) if sent is not None else []
    if len(calls) != 1:
        return 0.0
    name, args = calls[0]["name"], calls[0]["args"]
    schemas = {
        t["function"]["name"]: t["function"].get("parameters")
        for t in tools or []
        if isinstance(t, Mapping) and isinstance(t.get("function"), Mapping)
    }
    return float(call_matches_answer(name, args, answer, schemas.get(name)))


def load_eval_arrays(
    path: str | os.PathLike[str],
    task: Task | str | os.PathLike[str] | None = None,
    *,
    alpha: float = DEFAULT_ALPHA,
    reparse: bool = False,
    data: str | os.PathLike[str] | None = None,
) -> tuple[Task, SamplesFile, EvalArrays]:
    """Read a samples file, resolve its task and build the arrays (see :func:`eval_arrays`).

    *data* is the dataset the samples were drawn from (default: the one the header names),
    read for a task that grounds its calls, for records that do not store their
    conversation, and for a tool decision, for BFCL's possible answers
    (``EvalArrays.call_correct``; a dataset named in the header but absent is skipped).
    """
    samples = read_samples(Path(path))
    resolved = resolve_task(samples, task)
    items: dict[str, DatasetItem] | None
    if resolved.grounding is not None and data:
        items = dataset_items(samples, data)
    elif resolved.call_action is not None:  # for BFCL's possible answers, if at hand
        items = _named_items(samples, data)
    else:
        items = None
    return (
        resolved,
        samples,
        eval_arrays(resolved, samples, alpha=alpha, reparse=reparse, items=items),
    )
