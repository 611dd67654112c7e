"""The Ray engine of ``taskcal sample``: Ray Data's HTTP processor against many servers.

``taskcal sample --engine ray`` writes the same records into the same resumable
:class:`~taskcal_agents.workflow._store.SamplesStore` as the local engine; only who sends
the requests differs. Ray Data's ``HttpRequestProcessorConfig`` (``ray.data.llm``) posts
each item's chat-completions body, the one :func:`~taskcal_agents.sampling._openai_server.
build_request` builds for :class:`~taskcal_agents.sampling.OpenAISampler`, from a pool of
actors; the postprocess step parses the choices with the task's g_T, so what Ray returns
is labelled. The driver, shared with the in-Ray vLLM engine
(:func:`~taskcal_agents.workflow._ray_pipeline.run_pipeline`), assembles each item's record
from its labelled draws (:func:`~taskcal_agents.workflow._runner.sample_item` replayed over
them, so the record has the local engine's fields, grading and clusters) and appends the
records of each block Ray returns in one write; a rerun skips the ids already in the file.

Items are spread over the endpoints round-robin by block (each block holds whole items for
one endpoint, so an unreachable endpoint fails only its own blocks).
With greedy draws on, each item has two rows in the same pipeline, both to its endpoint:
the N samples and the greedy completion.

What Ray's HTTP processor does, and what this module does about it:

* Ray pushes every row through Arrow, which unifies the keys of nested dicts across rows
  (a message without ``name`` gets ``"name": null``, a tool schema gets the properties of
  another row's tool as ``null``). The payload therefore travels as one JSON string and an
  URL (:func:`request_payload`), and :class:`EnvelopeSession` (the processor's
  ``session_factory``) posts that string unchanged to that URL.
* An error body (HTTP 400, 500) comes back as JSON in ``http_response``, not as an
  exception: the postprocess checks for ``choices`` and marks the row failed.
* The processor has no continue-on-error: retries exhausted (connection refused, 429,
  502-504) or a body that is not JSON raise in the actor and fail the whole block. Blocks
  are therefore one batch each, and up to ``max_failures`` failed blocks are dropped
  (Ray Data's ``max_errored_blocks``): their items are reported failed, the job goes on,
  and a rerun retries them. A poison item found before the request (its body cannot be
  built) or after it (an error body, a wrong number of choices) fails alone.
* Requests within one batch are awaited one after another; parallelism comes from the
  actor pool (``concurrency`` actors).

``ray`` is imported only when the engine runs (``pip install 'taskcal-agents[ray]'``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from taskcal_agents._validation import check_int
from taskcal_agents.datasets import DatasetItem
from taskcal_agents.errors import ConfigurationError, SamplingError
from taskcal_agents.workflow._ray_pipeline import (
    ERROR_COLUMN,
    OK,
    DrawCollector,
    blocks_dataset,
    check_ray_settings,
    import_ray,
    items_to_sample,
    run_pipeline,
)
from taskcal_agents.workflow._runner import (
    SampleSettings,
    SamplingReport,
    build_messages,
    draw_params,
    message_to_dict,
    offered_tool_names,
)
from taskcal_agents.workflow._store import SamplesStore

if TYPE_CHECKING:
    from langchain_core.messages import AIMessage

    from taskcal_agents.decision import Task

__all__ = ["EnvelopeSession", "RayEngine", "run_sampling_ray"]


@dataclass(frozen=True)
class RayEngine:
    """Where and how the Ray engine sends requests.

    Attributes:
        endpoints: The servers' base URLs (``http://host:port/v1``); blocks go round-robin.
        model: The served model name.
        api_key: Bearer token sent to every endpoint.
        timeout: Seconds per request (aiohttp's total timeout).
        concurrency: HTTP actors per processor (each has one request in flight).
        batch_size: Requests per batch (and per block: a failed block loses them), rounded
            down to whole items (at least one item: its N-samples and greedy requests).
        max_retries: Ray's retries per request (connection errors, 408/429/502-504).
        address: The Ray cluster to join (``None``: the running one, else a local one).
        num_cpus: CPUs reserved per HTTP actor (they wait on the network).
        parse_tasks: Parse (postprocess) tasks at once. Each new worker process imports
            the library (seconds of CPU), and with fractional CPUs Ray would start one per
            fraction: a few workers, reused, parse faster than many starting up.
    """

    endpoints: tuple[str, ...]
    model: str
    api_key: str = "EMPTY"
    timeout: float = 600.0
    concurrency: int = 4
    batch_size: int = 4
    max_retries: int = 2
    address: str | None = None
    num_cpus: float = 0.1
    parse_tasks: int = 2

    def __post_init__(self) -> None:
        urls = tuple(u.rstrip("/") for u in self.endpoints if u.strip())
        if not urls:
            msg = "RayEngine needs at least one endpoint URL (--endpoints URL,URL or --base-url)."
            raise ConfigurationError(msg)
        bad = [u for u in urls if not u.startswith(("http://", "https://"))]
        if bad:
            msg = f"RayEngine endpoints must be http(s) URLs like http://host:8000/v1, got {bad}."
            raise ConfigurationError(msg)
        object.__setattr__(self, "endpoints", urls)
        check_int(self.concurrency, "RayEngine parameter 'concurrency'", minimum=1)
        check_int(self.batch_size, "RayEngine parameter 'batch_size'", minimum=1)
        check_int(self.max_retries, "RayEngine parameter 'max_retries'", minimum=0)
        check_int(self.parse_tasks, "RayEngine parameter 'parse_tasks'", minimum=1)
        if not 0 < self.timeout < math.inf:
            msg = f"RayEngine parameter 'timeout' must be finite and > 0, got {self.timeout!r}."
            raise ConfigurationError(msg)

    @classmethod
    def for_task(cls, task: Task, settings: SampleSettings, **fields: Any) -> RayEngine:
        """An engine for sampling *task* with *settings*, checked before anything is drawn.

        Refuses what the engine does not do (:func:`check_ray_settings`), imports Ray
        (:func:`import_ray`), then makes the engine from *fields* (its attributes), in this
        order, so that a refused setting is reported without Ray installed.

        Raises:
            ConfigurationError: Settings the Ray engine does not do, or bad *fields*.
            ImportError: Ray (or aiohttp) is not installed; the message says how to get it.
        """
        check_ray_settings(task, settings)
        import_ray()
        return cls(**fields)


# --------------------------------------------------------------------------------------
# the row functions (run inside Ray; pure, so tested without Ray)


def request_payload(endpoint: str, body: Mapping[str, Any]) -> dict[str, str]:
    """The envelope :class:`EnvelopeSession` unwraps: the URL and the body as one string."""
    return {"url": f"{endpoint.rstrip('/')}/chat/completions", "body": json.dumps(dict(body))}


def _failed(message: str) -> dict[str, Any]:
    return {ERROR_COLUMN: message}


def _choices_of(response: Any, n: int, *, parse_content: bool) -> list[AIMessage]:
    """The messages of a chat-completions response that Ray returned as JSON.

    Raises:
        SamplingError: An error body (no ``choices``), a malformed response, or the wrong
            number of choices.
    """
    from openai.types.chat import ChatCompletion

    from taskcal_agents.sampling import response_to_messages

    if not isinstance(response, Mapping) or not isinstance(response.get("choices"), list):
        detail = (
            response.get("message") or response.get("error")
            if isinstance(response, Mapping)
            else response
        )
        if isinstance(response, Mapping) and not detail:
            detail = {k: v for k, v in response.items() if v is not None}
        msg = f"the server answered with an error body: {json.dumps(detail, default=str)[:500]}"
        raise SamplingError(msg)
    try:
        parsed = ChatCompletion.model_validate(_drop_nulls(response))
    except ValueError as exc:
        msg = f"the server's response is not a chat completion: {exc}"
        raise SamplingError(msg) from exc
    return response_to_messages(parsed, n, parse_content=parse_content)


def _drop_nulls(value: Any) -> Any:
    """Drop ``None`` values of dicts (Arrow adds them for keys other rows had)."""
    if isinstance(value, Mapping):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def draws_per_item(settings: SampleSettings) -> int:
    """Rows per item in the HTTP engine: the N-samples draw, and the greedy one if on."""
    return 2 if settings.greedy else 1


def items_per_block(settings: SampleSettings, batch_size: int) -> int:
    """Whole items per block (and batch): ``batch_size`` rows rounded down, at least one."""
    return max(1, batch_size // draws_per_item(settings))


def batch_rows(settings: SampleSettings, batch_size: int) -> int:
    """Rows per block and per batch: :func:`items_per_block` whole items."""
    return items_per_block(settings, batch_size) * draws_per_item(settings)


def draw_rows(
    items: Sequence[DatasetItem],
    endpoints: Sequence[str],
    settings: SampleSettings,
    *,
    per_block: int = 1,
) -> list[dict[str, Any]]:
    """The rows of the HTTP engine: per item its N-samples draw and its greedy draw.

    Flat strings (Arrow-safe). Items go in blocks of *per_block*, and every row of a block
    goes to one endpoint (block *b* to endpoint *b mod K*): a batch fails as a whole when an
    endpoint is unreachable, so a dead endpoint then fails only its own blocks. Both draws
    of an item go to the same endpoint, so the server's prefix cache serves the second.
    """
    kinds = ["samples", "greedy"] if settings.greedy else ["samples"]
    return [
        {
            "id": item.id,
            "draw": j,
            "kind": kind,
            "item": item.model_dump_json(),
            "endpoint": endpoints[(i // per_block) % len(endpoints)],
        }
        for i, item in enumerate(items)
        for j, kind in enumerate(kinds)
    ]


@dataclass
class RequestStep:
    """Preprocess: the row's request body (the item's samples or greedy draw), enveloped."""

    task: Task
    settings: SampleSettings
    model: str

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        from taskcal_agents.sampling import build_request, wire_body

        try:
            item = DatasetItem.model_validate_json(row["item"])
            greedy = row["kind"] == "greedy"
            params = draw_params(self.settings, item.tools or None, greedy=greedy)
            request = build_request(self.model, build_messages(self.task, item), **params)
        except Exception as exc:
            return _failed(f"building the request failed: {type(exc).__name__}: {exc}")
        return {
            "payload": request_payload(row["endpoint"], wire_body(request)),
            "n_wanted": int(request["n"]),
            "parse_content": bool(request.get("tools")) and request.get("tool_choice") != "none",
            **OK,
        }


@dataclass
class ParseStep:
    """Postprocess: the response's choices as stored messages, labelled by the task's g_T.

    An error body, a malformed response or the wrong number of choices fails the row.
    """

    task: Task

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        keep = {"id": row["id"], "draw": row["draw"], "kind": row["kind"]}
        try:
            item = DatasetItem.model_validate_json(row["item"])
            messages = _choices_of(
                row.get("http_response"),
                int(row["n_wanted"]),
                parse_content=bool(row["parse_content"]),
            )
            names = offered_tool_names(item)
            labels = [self.task.parse_completion(m, tool_names=names) for m in messages]
        except Exception as exc:
            return {**keep, ERROR_COLUMN: f"{type(exc).__name__}: {exc}"}
        stored = [message_to_dict(m) for m in messages]
        return {**keep, "messages": json.dumps(stored), "labels": json.dumps(labels), **OK}


class EnvelopeSession:
    """The HTTP processor's session: posts each envelope's body to the envelope's URL.

    Ray's ``HttpRequestUDF`` calls ``session.post(url, headers=..., data=json.dumps(payload))``
    inside ``async with session_factory() as session``; the payload is
    :func:`request_payload`'s envelope, so the body posted is the exact JSON text built in
    the preprocess (no Arrow-added nulls) and the URL is the item's endpoint.
    """

    def __init__(self, timeout: float) -> None:
        import aiohttp

        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout))

    async def __aenter__(self) -> EnvelopeSession:
        await self._session.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self._session.__aexit__(*exc_info)

    def post(self, url: str, *, data: Any, headers: Mapping[str, str] | None = None) -> Any:
        envelope = json.loads(data)
        return self._session.post(envelope["url"], data=envelope["body"], headers=headers)


@dataclass
class _SessionFactory:
    timeout: float

    def __call__(self) -> EnvelopeSession:
        return EnvelopeSession(self.timeout)


# --------------------------------------------------------------------------------------
# the run


def build_dataset(
    task: Task, items: Sequence[DatasetItem], settings: SampleSettings, engine: RayEngine
) -> Any:
    """The Ray Data pipeline: draw rows -> request body -> HTTP actors -> parsed draws.

    Each block (and batch) holds whole items, all for one endpoint.
    """
    per = items_per_block(settings, engine.batch_size)
    rows = draw_rows(items, engine.endpoints, settings, per_block=per)
    return build_pipeline(task, settings, engine)(
        blocks_dataset(import_ray(), rows, batch_rows(settings, engine.batch_size))
    )


def build_pipeline(task: Task, settings: SampleSettings, engine: RayEngine) -> Any:
    """Ray's HTTP processor with this engine's request and parse steps.

    A callable from a dataset of :func:`draw_rows`' rows to the dataset of parsed draws.
    """
    import_ray()
    from ray.data.llm import HttpRequestProcessorConfig, build_processor

    config = HttpRequestProcessorConfig(
        url=f"{engine.endpoints[0]}/chat/completions",  # each envelope names its own
        headers={"Authorization": f"Bearer {engine.api_key}"},
        batch_size=batch_rows(settings, engine.batch_size),
        # a fixed pool (min = max): the actors start at once instead of scaling up
        concurrency=(engine.concurrency, engine.concurrency),
        max_retries=engine.max_retries,
        base_retry_wait_time_in_s=0.5,
        session_factory=_SessionFactory(engine.timeout),
        http_request_stage={"num_cpus": engine.num_cpus},
    )
    return build_processor(
        config,
        preprocess=RequestStep(task, settings, engine.model),
        postprocess=ParseStep(task),
        preprocess_map_kwargs={"num_cpus": engine.num_cpus},
        postprocess_map_kwargs={"num_cpus": engine.num_cpus, "concurrency": engine.parse_tasks},
    )


def run_sampling_ray(
    task: Task,
    items: Sequence[DatasetItem],
    store: SamplesStore,
    settings: SampleSettings,
    engine: RayEngine,
    *,
    max_failures: int = 10,
    on_record: Callable[[dict[str, Any] | None], None] | None = None,
) -> SamplingReport:
    """Sample every item not yet in *store* on Ray; append each returned block at once.

    Args:
        task: The task (parser, prompt, labels).
        items: The dataset.
        store: The open samples store (its ``done`` ids are skipped).
        settings: N, temperature, greedy, max_tokens (no logprob belief, no adaptive N).
        engine: Endpoints, model and the actor pool.
        max_failures: Stop after this many failed items, as the local engine does. It also
            bounds the blocks Ray may drop after an error (Ray Data's
            ``max_errored_blocks``); the items of a dropped block are reported failed when
            the job ends.
        on_record: Called after each finished item with its record (``None`` on failure).

    Returns:
        The report; failed items are not written, so a rerun retries them.

    Raises:
        ConfigurationError: Bad item labels or settings the engine does not do.
        ImportError: Ray is not installed.
    """
    todo = items_to_sample(task, items, store, settings)
    collector = DrawCollector(task, settings, todo, draws_per_item(settings))
    per = items_per_block(settings, engine.batch_size)
    return run_pipeline(
        lambda: build_dataset(task, todo, settings, engine),
        collector,
        store,
        len(items),
        address=engine.address,
        max_failures=max_failures,
        max_errored_blocks=max(1, math.ceil(max_failures / per)),
        on_record=on_record,
    )
