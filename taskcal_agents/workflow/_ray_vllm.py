"""The offline variant of the Ray engine: vLLM inside Ray actors (``vLLMEngineProcessorConfig``).

When Ray owns the GPUs, Ray Data runs vLLM in its actors instead of posting to servers.
Its vLLM stage keeps only the *first* output of a request (``output.outputs[0]``), so
``n`` cannot be asked for in one request: each item becomes N sample rows (``n=1``, the
sampling temperature, *distinct seeds* ``seed + j`` so the N draws differ and a rerun
draws the same ones) and one greedy row (temperature 0). Prefix caching is on, so the N+1
rows of an item share the prompt's KV cache as one ``n=N`` request would.
:class:`~taskcal_agents.workflow._ray_pipeline.DrawCollector` gathers the N+1 rows of an
item back into one record, the same record the HTTP engine and the local engine write.

The prompt is rendered in the preprocess with the model's chat template and the item's
own tools (Ray's chat-template stage takes neither per-row tools nor messages safely
through Arrow), and the completion text is read as a choice by the shared treatment
(:func:`~taskcal_agents.sampling._choices.choice_message`, tool calls read from the text).

:func:`run_sampling_vllm` runs it into a samples store, resumably, through the same
runner as the HTTP engine (:func:`~taskcal_agents.workflow._ray_pipeline.run_pipeline`).

Not run here (no GPU): the row functions are unit-tested; :func:`build_vllm_dataset`
needs ``ray[llm]`` and vLLM on the GPU nodes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from taskcal_agents._dtype import choose_dtype
from taskcal_agents.datasets import DatasetItem
from taskcal_agents.sampling import choice_message
from taskcal_agents.workflow._ray_pipeline import (
    ERROR_COLUMN,
    OK,
    DrawCollector,
    blocks_dataset,
    import_ray,
    items_to_sample,
    run_pipeline,
)
from taskcal_agents.workflow._runner import (
    SampleSettings,
    SamplingReport,
    build_messages,
    message_to_dict,
    offered_tool_names,
)
from taskcal_agents.workflow._store import SamplesStore

if TYPE_CHECKING:
    from taskcal_agents.decision import Task

__all__ = [
    "VLLMParseStep",
    "VLLMPromptStep",
    "build_vllm_dataset",
    "replica_rows",
    "run_sampling_vllm",
    "vllm_collector",
]


def replica_rows(
    items: Sequence[DatasetItem], settings: SampleSettings, *, seed: int = 0
) -> list[dict[str, Any]]:
    """N sample rows (distinct seeds ``seed + j``) and a greedy row per item.

    Each row carries the item (JSON), its draw index and its ``sampling_params``, all
    Arrow-safe (flat values and one flat dict shape).
    """
    rows = []
    for item in items:
        as_json = item.model_dump_json()
        for j in range(settings.n):
            params = {"n": 1, "temperature": settings.temperature, "seed": seed + j}
            rows.append(_row(item.id, j, "samples", as_json, params, settings))
        if settings.greedy:
            params = {"n": 1, "temperature": 0.0, "seed": seed}
            rows.append(_row(item.id, settings.n, "greedy", as_json, params, settings))
    return rows


def _row(
    rid: str, draw: int, kind: str, item: str, params: dict[str, Any], settings: SampleSettings
) -> dict[str, Any]:
    if settings.max_tokens is not None:
        params["max_tokens"] = settings.max_tokens
    # max_tokens also on its own: the vLLM stage pops sampling_params from the row
    return {
        "id": rid,
        "draw": draw,
        "kind": kind,
        "item": item,
        "sampling_params": params,
        "max_tokens": settings.max_tokens,
    }


def vllm_collector(
    task: Task, settings: SampleSettings, items: Sequence[DatasetItem]
) -> DrawCollector:
    """The collector of the N + 1 rows per item (N with greedy off)."""
    return DrawCollector(task, settings, items, settings.n + (1 if settings.greedy else 0))


@dataclass
class VLLMPromptStep:
    """Preprocess: the item's prompt by the model's chat template, with its own tools.

    Attributes:
        task: The task (its prompt is merged into the messages).
        model_source: The model (Hugging Face id or path) whose tokenizer renders it.
        render: ``render(messages, tools) -> prompt``; default the tokenizer's
            ``apply_chat_template`` (loaded once per worker).
    """

    task: Task
    model_source: str
    render: Any = None
    _tokenizer: Any = field(default=None, init=False, repr=False)

    def _render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        if self.render is not None:
            return str(self.render(messages, tools))
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self.model_source)
        return str(
            self._tokenizer.apply_chat_template(
                messages, tools=tools or None, add_generation_prompt=True, tokenize=False
            )
        )

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        try:
            item = DatasetItem.model_validate_json(row["item"])
            prompt = self._render(build_messages(self.task, item), item.tools)
        except Exception as exc:
            return {ERROR_COLUMN: f"rendering the prompt failed: {type(exc).__name__}: {exc}"}
        return {"prompt": prompt, "sampling_params": row["sampling_params"], **OK}


@dataclass
class VLLMParseStep:
    """Postprocess: the generated text as a stored message, labelled by the task's g_T.

    A completion that used all ``max_tokens`` is marked ``finish_reason="length"`` (the
    stage reports no finish reason).
    """

    task: Task

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        keep = {"id": row["id"], "draw": row["draw"], "kind": row["kind"]}
        try:
            item = DatasetItem.model_validate_json(row["item"])
            limit = row.get("max_tokens")
            produced = int(row.get("num_generated_tokens") or 0)
            finish = "length" if limit is not None and produced >= int(limit) else "stop"
            message = choice_message(
                row.get("generated_text") or "",
                finish_reason=finish,
                read_content=bool(item.tools),
            )
            names = offered_tool_names(item)
            labels = [self.task.parse_completion(message, tool_names=names)]
        except Exception as exc:
            return {**keep, ERROR_COLUMN: f"{type(exc).__name__}: {exc}"}
        return {
            **keep,
            "messages": json.dumps([message_to_dict(message)]),
            "labels": json.dumps(labels),
            **OK,
        }


def build_vllm_dataset(
    task: Task,
    items: Sequence[DatasetItem],
    settings: SampleSettings,
    model_source: str,
    *,
    concurrency: int = 1,
    batch_size: int = 64,
    seed: int = 0,
    engine_kwargs: dict[str, Any] | None = None,
) -> Any:
    """The Ray Data pipeline of the in-Ray vLLM engine (rows for :func:`vllm_collector`).

    :func:`run_sampling_vllm` runs it into a samples store.

    Args:
        task: The task.
        items: The items to sample.
        settings: N, temperature, greedy, max_tokens.
        model_source: The model (Hugging Face id or path) each vLLM actor loads.
        concurrency: vLLM actors (one per GPU with tensor parallelism 1).
        batch_size: Rows per batch.
        seed: The first sample seed (sample *j* of every item uses ``seed + j``).
        engine_kwargs: More vLLM engine arguments (prefix caching is on unless set off; the
            dtype is :func:`~taskcal_agents.serving.choose_dtype`'s, ``$TASKCAL_DTYPE`` if set).
    """
    ray = import_ray()
    from ray.data.llm import build_processor, vLLMEngineProcessorConfig

    # The one dtype rule (taskcal_agents._dtype): on GPUs vLLM's default unless
    # $TASKCAL_DTYPE or engine_kwargs name one.
    choice = choose_dtype(device="gpu", extra_args=())
    dtype = {} if choice.dtype is None else {"dtype": choice.dtype}
    config = vLLMEngineProcessorConfig(
        model_source=model_source,
        engine_kwargs={"enable_prefix_caching": True, **dtype, **(engine_kwargs or {})},
        concurrency=concurrency,
        batch_size=batch_size,
        chat_template_stage=False,  # rendered in the preprocess, with each item's tools
        should_continue_on_error=True,  # a poison row fails alone (the error column)
    )
    processor = build_processor(
        config,
        preprocess=VLLMPromptStep(task, model_source),
        postprocess=VLLMParseStep(task),
    )
    rows = replica_rows(items, settings, seed=seed)
    return processor(blocks_dataset(ray, rows, batch_size))


def run_sampling_vllm(
    task: Task,
    items: Sequence[DatasetItem],
    store: SamplesStore,
    settings: SampleSettings,
    model_source: str,
    *,
    concurrency: int = 1,
    batch_size: int = 64,
    seed: int = 0,
    engine_kwargs: dict[str, Any] | None = None,
    address: str | None = None,
    max_failures: int = 10,
    on_record: Callable[[dict[str, Any] | None], None] | None = None,
) -> SamplingReport:
    """Sample every item not yet in *store* with vLLM inside Ray; append each block at once.

    The arguments are :func:`build_vllm_dataset`'s, plus the Ray cluster to join, the
    failures to stop after and a per-record callback (as
    :func:`~taskcal_agents.workflow._ray_engine.run_sampling_ray`).

    Raises:
        ConfigurationError: Bad item labels or settings the engine does not do.
        ImportError: Ray (or, in the actors, vLLM) is not installed.
    """
    todo = items_to_sample(task, items, store, settings)
    return run_pipeline(
        lambda: build_vllm_dataset(
            task,
            todo,
            settings,
            model_source,
            concurrency=concurrency,
            batch_size=batch_size,
            seed=seed,
            engine_kwargs=engine_kwargs,
        ),
        vllm_collector(task, settings, todo),
        store,
        len(items),
        address=address,
        max_failures=max_failures,
        max_errored_blocks=max_failures,  # rows fail alone here (should_continue_on_error)
        on_record=on_record,
    )
