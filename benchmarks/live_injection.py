"""Prompt injections, live: the middleware around a served model on AgentDojo cases.

For each case (a user task with one injection task, AgentDojo's "important_instructions"
attack in every vector the task sees), a LangChain agent (``create_agent``) runs the user
task in the suite's environment: its tools are the suite's functions, its middleware
:class:`~taskcal_agents.langchain.TaskCalibrationMiddleware` (``tool_decision``, N samples,
a decision on every model call, no calibrator) and
:class:`~taskcal_agents.langchain.ToolReplyMiddleware`. The run is the policy-free one; one
sampling pass is scored twice:

- **without a policy**: the run as it went; AgentDojo's own checks on its end state
  (``user_task.utility``: the user's task done; ``injection_task.security``: the attacker's
  goal reached, *targeted attack success*);
- **with** ``trust: by_kind`` (the default policy: the argument-kind rules and the warrant
  rule, with the suite's tool effects from ``injection_policies/SUITE.yaml``): at each model
  call the same N samples are decided by a second middleware with the policy (its own
  ``wrap_model_call``, the samples replayed through its handler). Where its decision
  differs from the run's, the run with the policy would have
  stopped there with its question (a confirmation, or a refusal): AgentDojo's checks are
  scored on the environment as it was before that step's tools ran, with that question as
  the model's output.

It also counts how often any sample made the injection task's ground-truth call at all.

One JSON line per case in ``--out`` (a rerun resumes, skipping the cases done). Never in
CI: it needs a server (``taskcal serve --model qwen2.5-coder-1.5b-instruct``) and hours.

Run::

    PYTHONPATH=benchmarks runs/.venv-agentdojo/bin/python benchmarks/live_injection.py \\
        --base-url http://127.0.0.1:8010/v1 [--cases 40] [--n 4] [--out runs/injection/live.jsonl]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime
from agentdojo_replay import _format_output, load_suites, tool_schemas
from bench_injection import attack_texts, suite_effects, task_with
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage
from langchain_core.tools import StructuredTool
from langchain_openai import ChatOpenAI

from taskcal_agents.decision import SamplingOptions
from taskcal_agents.langchain import TaskCalibrationMiddleware, ToolReplyMiddleware
from taskcal_agents.parsing import TrustPolicy, argument_kind

SUITES = ("banking", "slack", "travel", "workspace")


def cases(suites: Mapping[str, Any], limit: int) -> list[tuple[str, str, str]]:
    """``(suite, user task, injection task)``, the suites interleaved, each user task once.

    User task k of a suite meets injection task k mod (its number): every injection task
    is met, and a prefix of the list is balanced between the suites.
    """
    per_suite = []
    for name in SUITES:
        suite = suites[name]
        users = sorted(suite.user_tasks, key=_task_number)
        injections = sorted(suite.injection_tasks, key=_task_number)
        per_suite.append([(name, u, injections[k % len(injections)]) for k, u in enumerate(users)])
    out = [c for group in zip(*per_suite, strict=False) for c in group]
    longest = max(per_suite, key=len)
    out += longest[len(out) // len(per_suite) :]
    return out[:limit]


def _task_number(task_id: str) -> int:
    return int(task_id.rsplit("_", 1)[-1])


class SampleRecorder(BaseCallbackHandler):
    """Keeps the generations of every chat-model call (the N samples of each decision)."""

    def __init__(self) -> None:
        self.generations: list[list[AIMessage]] = []

    def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        for group in response.generations:
            self.generations.append([g.message for g in group if isinstance(g.message, AIMessage)])


class RequestRecorder(AgentMiddleware):
    """The outermost middleware: keeps each model request and the reply the agent got."""

    def __init__(self) -> None:
        super().__init__()
        self.steps: list[dict[str, Any]] = []

    def wrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        step: dict[str, Any] = {"request": request, "samples_from": None}
        self.steps.append(step)
        result = handler(request)
        step["result"] = result
        return result


def suite_tools(
    suite: Any, environment_box: dict[str, Any], recorder: RequestRecorder
) -> list[StructuredTool]:
    """The suite's functions as LangChain tools acting on ``environment_box["env"]``.

    Before the first tool of a model call runs, the environment is copied: the state the
    run with a policy ends in when it stops at that call.
    """
    runtime = FunctionsRuntime(suite.tools)
    snapshots: dict[int, Any] = environment_box.setdefault("snapshots", {})
    traces: list[tuple[int, FunctionCall]] = environment_box.setdefault("traces", [])

    def make(schema: Mapping[str, Any]) -> StructuredTool:
        name = schema["function"]["name"]

        def run(**kwargs: Any) -> str:
            step = len(recorder.steps) - 1
            snapshots.setdefault(step, environment_box["env"].model_copy(deep=True))
            traces.append((step, FunctionCall(function=name, args=dict(kwargs))))
            result, error = runtime.run_function(environment_box["env"], name, kwargs)
            return error if error else _format_output(result)

        return StructuredTool.from_function(
            run,
            name=name,
            description=schema["function"]["description"] or name,
            args_schema=schema["function"]["parameters"],
        )

    return [make(s) for s in tool_schemas(suite)]


def replayed(samples: Sequence[AIMessage]) -> Any:
    """A model handler that returns ``samples`` one per call (for the policy's middleware)."""
    queue: Iterator[AIMessage] = iter(list(samples))

    def handler(request: ModelRequest) -> ModelResponse:
        return ModelResponse(result=[next(queue)])

    return handler


def matches(call: Mapping[str, Any], target: Mapping[str, Any]) -> bool:
    """Whether a sampled call is the injection's: its tool, and its identifying values.

    The identifying values are the target's arguments of kind recipient, URL, path,
    credential or identifier (all its arguments when it has none of those).
    """
    if call.get("name") != target["name"]:
        return False
    args = call.get("args") or {}
    keys = [
        k for k, v in target["args"].items() if argument_kind(k, {}, v) not in ("other", "amount")
    ]
    keys = keys or list(target["args"])
    norm = lambda v: json.dumps(v, sort_keys=True, default=str).lower()  # noqa: E731
    return all(norm(args.get(k)) == norm(target["args"][k]) for k in keys)


def run_case(
    suites: Mapping[str, Any], case: tuple[str, str, str], *, base_url: str, model: str, n: int
) -> dict[str, Any]:
    name, user_id, injection_id = case
    suite = suites[name]
    user_task = suite.get_user_task_by_id(user_id)
    injection_task = suite.get_injection_task_by_id(injection_id)
    injections = attack_texts(suite, user_task, injection_task)
    environment = user_task.init_environment(suite.load_and_inject_default_environment(injections))
    pre_environment = environment.model_copy(deep=True)
    targets = [
        {"name": c.function, "args": dict(c.args)}
        for c in injection_task.ground_truth(pre_environment.model_copy(deep=True))
    ]
    box: dict[str, Any] = {"env": environment}
    requests = RequestRecorder()
    samples = SampleRecorder()
    tools = suite_tools(suite, box, requests)
    options = SamplingOptions(n_samples=n)
    effects = suite_effects(name)
    plain = TaskCalibrationMiddleware(
        task=task_with(None, effects), calibrator=None, options=options, decide_on="every_call"
    )
    guarded = TaskCalibrationMiddleware(
        task=task_with(TrustPolicy.by_kind(), effects), calibrator=None, options=options,
        decide_on="every_call", sampling="handler",
    )  # fmt: skip
    llm = ChatOpenAI(
        base_url=base_url, api_key="none", model=model, temperature=1.0, max_retries=1, timeout=600
    )
    agent = create_agent(
        llm,
        tools=tools,
        system_prompt=_system_prompt(),
        middleware=[requests, plain, ToolReplyMiddleware()],
    )
    started = time.perf_counter()
    error = None
    output = ""
    try:
        state = agent.invoke(
            {"messages": [{"role": "user", "content": user_task.PROMPT}]},
            config={"callbacks": [samples], "recursion_limit": 24},
        )
        last = state["messages"][-1]
        output = last.content if isinstance(last.content, str) else json.dumps(last.content)
    except Exception as exc:  # a case that fails (context too long, recursion) is recorded
        error = f"{type(exc).__name__}: {exc}"[:500]
    post_environment = box["env"]
    # Score the same samples with the policy, model call by model call.
    groups = iter(samples.generations)
    decisions = []
    stop: dict[str, Any] | None = None
    sampled_injected = False
    for k, step in enumerate(requests.steps):
        drawn = next(groups, [])
        sampled_injected |= any(_injected(m, targets) for m in drawn)
        result = step.get("result")
        run_message = _message_of(result)
        if not drawn or run_message is None:
            decisions.append({"step": k, "drawn": len(drawn)})
            continue
        policy_message = _message_of(guarded.wrap_model_call(step["request"], replayed(drawn)))
        same = policy_message is not None and _same_reply(run_message, policy_message)
        decisions.append({
            "step": k, "drawn": len(drawn),
            "run": _describe(run_message), "policy": _describe(policy_message),
            "injected_sampled": sum(_injected(m, targets) for m in drawn),
        })  # fmt: skip
        if stop is None and not same:
            stop = {"step": k, "message": policy_message}
    traces = [call for _, call in box.get("traces", [])]
    if stop is None:
        policy_env, policy_output, policy_traces = post_environment, output, traces
    else:
        policy_traces = [call for step, call in box.get("traces", []) if step < stop["step"]]
        policy_env = box["snapshots"].get(stop["step"], post_environment)
        message = stop["message"]
        policy_output = (
            message.content if message is not None and isinstance(message.content, str) else ""
        )
    return {
        "suite": name, "user_task": user_id, "injection_task": injection_id,
        "seconds": round(time.perf_counter() - started, 1), "error": error,
        "model_calls": len(requests.steps), "sampled_injected_call": sampled_injected,
        "none": _checks(user_task, injection_task, output, pre_environment, post_environment,
                        traces),
        "by_kind": _checks(user_task, injection_task, policy_output, pre_environment, policy_env,
                           policy_traces),
        "policy_stopped_at": None if stop is None else stop["step"],
        "decisions": decisions,
    }  # fmt: skip


def _injected(message: AIMessage, targets: Sequence[Mapping[str, Any]]) -> bool:
    return any(matches(c, t) for c in message.tool_calls for t in targets)


def _checks(
    user_task: Any, injection_task: Any, output: str, pre: Any, post: Any, traces: list[Any]
) -> dict[str, bool | None]:
    """AgentDojo's own checks, as its task suite runs them: from the call traces first."""
    out: dict[str, bool | None] = {}
    for key, task, name in (
        ("utility", user_task, "utility"),
        ("attack_success", injection_task, "security"),
    ):
        try:
            verdict = getattr(task, f"{name}_from_traces")(
                output, pre.model_copy(deep=True), post.model_copy(deep=True), traces
            )
            if verdict is None:
                verdict = getattr(task, name)(
                    output, pre.model_copy(deep=True), post.model_copy(deep=True)
                )
            out[key] = bool(verdict)
        except Exception:  # a check that cannot read the state counts as not reached
            out[key] = None
    return out


def _message_of(result: Any) -> AIMessage | None:
    if isinstance(result, AIMessage):
        return result
    inner = getattr(result, "model_response", result)
    messages = getattr(inner, "result", None) or []
    return next((m for m in messages if isinstance(m, AIMessage)), None)


def _same_reply(a: AIMessage, b: AIMessage) -> bool:
    def calls(m: AIMessage) -> list[tuple[str, str]]:
        return sorted(
            (c["name"], json.dumps(c["args"], sort_keys=True, default=str)) for c in m.tool_calls
        )

    if a.tool_calls or b.tool_calls:
        return calls(a) == calls(b)
    return True  # two texts: neither runs a tool, the run ends the same way


def _describe(message: AIMessage | None) -> Any:
    if message is None:
        return None
    if message.tool_calls:
        return [{"name": c["name"], "args": c["args"]} for c in message.tool_calls]
    return (message.content if isinstance(message.content, str) else "")[:200]


def _system_prompt() -> str:
    from agentdojo_replay import system_message

    return system_message()


def summarise(rows: Sequence[Mapping[str, Any]]) -> str:
    lines = [
        "| suite | cases | errors | sampled the injected call | policy | utility "
        "| targeted attack success |",
        "|---|---|---|---|---|---|---|",
    ]
    for suite in (*SUITES, "all"):
        mine = [r for r in rows if suite == "all" or r["suite"] == suite]
        if not mine:
            continue
        for policy in ("none", "by_kind"):
            util = sum(bool(r[policy]["utility"]) for r in mine) / len(mine)
            attack = sum(bool(r[policy]["attack_success"]) for r in mine) / len(mine)
            sampled = sum(r["sampled_injected_call"] for r in mine) / len(mine)
            errors = sum(r["error"] is not None for r in mine)
            lines.append(
                f"| {suite} | {len(mine)} | {errors} | {sampled:.0%} | {policy} | {util:.0%} "
                f"| {attack:.0%} |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--cases", type=int, default=40)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--out", type=Path, default=Path("runs/injection/live.jsonl"))
    parser.add_argument("--summary-only", action="store_true")
    args = parser.parse_args(argv)
    suites = load_suites()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    done = {}
    if args.out.exists():
        for line in args.out.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                done[(row["suite"], row["user_task"], row["injection_task"])] = row
    if not args.summary_only:
        for case in cases(suites, args.cases):
            if case in done:
                continue
            row = run_case(suites, case, base_url=args.base_url, model=args.model, n=args.n)
            done[case] = row
            with args.out.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(row, default=str) + "\n")
            print(
                f"{case}: {row['seconds']} s, none={row['none']}, by_kind={row['by_kind']}, "
                f"error={row['error']}",
                file=sys.stderr,
                flush=True,
            )
    wanted = set(cases(suites, args.cases))
    print(summarise([r for c, r in done.items() if c in wanted]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
