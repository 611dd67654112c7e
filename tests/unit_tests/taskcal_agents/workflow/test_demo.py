"""``taskcal demo`` against a fake OpenAI-compatible server (httpx.MockTransport), no vLLM.

On STS-B the fake answers one-pass belief requests (``max_tokens=1``, ``top_logprobs``, a
choice constraint) with log-probabilities drawn per prompt around a rating two points too
high (a systematic miscalibration that a calibration map can undo). On the tool-use
requests it answers sampled requests (``n`` completions with the tools) by replaying the
real Qwen2.5-Coder-0.5B calls captured for that request in the hand-labelled grounding set
(``tests/data/grounding/calls.jsonl``), mixed per prompt with a question; a request that
no offered tool serves gets a call to a tool it was not offered or a refusal. As the real
model does, it calls a tool on most requests, with invented arguments where the request
lacks them.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from typer.testing import CliRunner

from taskcal_agents import models, serving
from taskcal_agents.cli import app
from taskcal_agents.commands import _demo as demo_cmd
from taskcal_agents.datasets import SHARED_DATA_ENV, convert
from taskcal_agents.errors import DataFileError
from taskcal_agents.sampling import OpenAISampler
from taskcal_agents.serving import DtypeChoice
from taskcal_agents.workflow import read_samples
from taskcal_agents.workflow._calibrate import CALIBRATE_MAX_TOKENS
from taskcal_agents.workflow._demo import (
    DEMO_FORMAT,
    DEMO_MAX_TOKENS,
    DEMO_N,
    WARMUP_ITEMS,
    Estimate,
    demo_items,
    demo_live_items,
    demo_live_task,
    run_demo,
    stsb_items,
)

BASE_URL = "http://fake-vllm.test/v1"
N_STSB = 24
CALLS = Path(__file__).resolve().parents[3] / "data" / "grounding" / "calls.jsonl"
QUESTION = "Could you tell me more about what you need?"
REFUSAL = "I'm sorry, I cannot help with that."
UNOFFERED = {"name": "do_it", "args": {"request": "what the user asked"}}
PAYMENT = "Send 50 EUR to DE89 3704 0044 0532 0130 00."
PAYMENT_CALL = {
    "name": "send_money",
    "args": {"amount": 50, "currency": "EUR", "iban": "DE89 3704 0044 0532 0130 00"},
}
MOON = "Book me a table for two at a restaurant on the Moon tonight."
"""A call to a tool no request is offered (the real model's way to say no tool fits)."""


@pytest.fixture
def shared_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A shared data folder whose STS-B dev file holds 60 pairs, 10 per rating."""
    folder = tmp_path / "shared"
    (folder / "stsb").mkdir(parents=True)
    rows = [
        f"main-news\tfile\t2016\t{i:04d}\t{i % 6}.0\tA sentence number {i}.\tAnother one, {i}."
        for i in range(60)
    ]
    (folder / "stsb" / "sts-dev.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    monkeypatch.setenv(SHARED_DATA_ENV, str(folder))
    return folder


class FakeServer:
    """STS-B one-pass requests (top_logprobs under a choice constraint) and sampled tool use."""

    def __init__(self, shared: Path) -> None:
        self.truth = {str(i.messages[-1]["content"]): str(i.label) for i in demo_items()}
        source = shared / "stsb" / "sts-dev.csv"
        self.truth |= {
            str(i.messages[-1]["content"]): str(i.label) for i in convert("stsb", source)
        }
        by_id = {i.id: str(i.messages[-1]["content"]) for i in demo_items()}
        self.calls: dict[str, list[dict[str, Any]]] = {}
        for line in CALLS.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if row["dataset"] == "demo":
                self.calls.setdefault(by_id[row["item_id"]], []).append(row["call"])
        # The live requests: the Paris weather and "What's the weather like?" are demo
        # requests (their captured calls); the payment gets its exact call, the Moon none.
        self.truth |= {str(i.messages[-1]["content"]): str(i.label) for i in demo_live_items()}
        self.calls[PAYMENT] = [PAYMENT_CALL]
        self.calls[MOON] = []
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def top(self, prompt: str, choices: list[str]) -> dict[str, float]:
        """STS-B log-probabilities of *choices*: a per-prompt draw two points too high."""
        said = min(int(self.truth[prompt]) + 2, 5)
        logits = self._rng(prompt).normal(0.0, 0.5, len(choices))
        logits[said] += 1.5
        logprobs = logits - np.log(np.exp(logits).sum())
        return dict(zip(choices, logprobs.tolist(), strict=True))

    @staticmethod
    def _rng(prompt: str) -> np.random.Generator:
        return np.random.default_rng(int(hashlib.sha256(prompt.encode()).hexdigest()[:8], 16))

    def completions(self, prompt: str, n: int) -> list[dict[str, Any]]:
        """*n* tool-use completions: a captured call, another tool's call or a text per draw.

        As the real model does, a request that no offered tool can serve mostly gets a
        call to a tool it was not offered (which g_T leaves unparsed) or a refusal; the
        others mostly get their captured calls (grounded on the ``tool_call`` requests,
        invented on the others), else a question. The draw is seeded by the
        prompt, so a request always gets the same *n*.
        """
        rng, calls = self._rng(prompt), self.calls[prompt]
        refuse = self.truth[prompt] == "cannot_answer"
        p_call, p_other = (0.0, 0.6) if refuse else (0.8, 0.0)
        out = []
        for i in range(n):
            u = rng.random()
            if u < p_call + p_other:
                call = calls[i % len(calls)] if u < p_call else UNOFFERED
                raw = {
                    "id": f"call-{i}",
                    "type": "function",
                    "function": {"name": call["name"], "arguments": json.dumps(call["args"])},
                }
                message = {"role": "assistant", "content": None, "tool_calls": [raw]}
                finish = "tool_calls"
            else:
                text = REFUSAL if refuse else QUESTION
                message, finish = {"role": "assistant", "content": text}, "stop"
            out.append({"index": i, "message": message, "finish_reason": finish})
        return out

    def __call__(self, request: httpx.Request) -> httpx.Response:
        payload = json.loads(request.content)
        with self._lock:
            self.requests.append(payload)
        prompt = payload["messages"][-1]["content"]
        body = {"id": "c", "object": "chat.completion", "created": 0, "model": "fake"}
        choices = (payload.get("structured_outputs") or {}).get("choice")
        if payload.get("tools"):
            limits = (DEMO_MAX_TOKENS, CALIBRATE_MAX_TOKENS)  # the parts', the shipped map's
            if payload.get("logprobs") or choices or payload.get("max_tokens") not in limits:
                return httpx.Response(400, json={"message": f"not a sampled request: {payload}"})
            completions = self.completions(prompt, payload["n"])
            return httpx.Response(200, json={**body, "choices": completions})
        if payload.get("max_tokens") != 1 or not payload.get("logprobs") or not choices:
            return httpx.Response(400, json={"message": f"not a one-pass request: {payload}"})
        top = self.top(prompt, choices)
        entries = [
            {"token": token, "logprob": lp, "bytes": list(token.encode())}
            for token, lp in top.items()
        ]
        first = max(entries, key=lambda e: e["logprob"])
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": first["token"]},
            "finish_reason": "length",
            "logprobs": {"content": [{**first, "top_logprobs": entries}]},
        }
        return httpx.Response(200, json={**body, "choices": [choice]})

    def sampler(self) -> OpenAISampler:
        transport = httpx.MockTransport(self)
        return OpenAISampler(BASE_URL, "fake", http_client=httpx.Client(transport=transport))


# The unregularised maps (matrix scaling) meet well-separated fake beliefs and stop at
# their iteration limit; that is expected here and not what these tests check.
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_run_demo_evaluates_both_parts_decides_live_and_resumes(
    shared_data: Path, tmp_path: Path
) -> None:
    server = FakeServer(shared_data)
    out = tmp_path / "out"
    released: list[int] = []

    def release() -> None:
        released.append(len(server.requests))
        assert not (out / "stsb.evaluation.json").exists()  # the server stops first

    result = run_demo(
        server.sampler(),
        out,
        model="fake/model",
        base_url=BASE_URL,
        stsb=stsb_items(N_STSB),
        permutations=1,
        release=release,
    )

    # One request per item and per live decision, the server released after the last.
    assert len(server.requests) == N_STSB + 36 + 4
    assert released == [len(server.requests)]
    assert [part.key for part in result.parts] == ["stsb", "tool_use"]
    assert [p.n_sampled_now for p in result.parts] == [N_STSB, 36]
    assert result.parts[0].samples_path == out / "stsb.own_prompt.fake_model.samples.jsonl"
    assert result.parts[1].samples_path == out / f"tool_use.n{DEMO_N}.fake_model.samples.jsonl"
    assert list(result.timings) == [
        "stsb_sampling",
        "tool_use_sampling",
        "decisions",
        "server_stop",
        "stsb_evaluation",
        "stsb_shuffle_test",
        "tool_use_evaluation",
        "tool_use_shuffle_test",
        "total",
    ]
    assert result.timings["stsb_shuffle_test"] <= result.timings["stsb_evaluation"]
    steps = [v for k, v in result.timings.items() if k != "total" and "shuffle" not in k]
    assert result.timings["total"] >= sum(steps) - 0.5  # each step is rounded to 0.1 s

    stsb = result.parts[0].evaluation
    costs = {row["decoder"]: row["expected_cost"] for row in stsb["decoders"]}
    assert "greedy" not in costs  # no greedy completion is drawn
    assert {"constant", "majority", "mbr_raw", "mbr_dirichlet"} <= set(costs)
    # The fake rates two points too high: raw MBR pays for it, calibration undoes much of
    # it (24 items, about 19 to fit a 6-class map per fold: 1.46 against 1.08 here).
    assert costs["mbr_raw"] > 1.0
    assert costs["mbr_dirichlet"] < costs["mbr_raw"] - 0.25
    assert costs["mbr_dirichlet"] < costs["constant"]
    assert stsb["permutation_test"]["n_permutations"] == 1
    assert stsb["meta"]["belief"] == "one_pass"
    on_disk = json.loads((out / "stsb.evaluation.json").read_text())
    assert on_disk["decoders"] == json.loads(json.dumps(stsb["decoders"]))

    # The tool-use part samples N completions with the tools, grounded by the task.
    tool_use = result.parts[1].evaluation
    assert tool_use["meta"]["n"] == DEMO_N
    assert {"mbr_raw", "mbr_raw_any", "mbr_dirichlet"} <= {
        r["decoder"] for r in tool_use["decoders"]
    }
    # ... and its effect-aware rows: the same samples decided per effect (cross-fitted), the
    # flat decision beside the effect-aware ones, scored under one matrix
    rows = {r["decoder"]: r for r in tool_use["effect_rows"]}
    assert list(rows) == ["constant", "raw confirm", "flat", "effects", "confirm"]
    assert rows["confirm"]["generic_asks"] == 0

    # The live decisions go through the runtime (fresh samples, Decider.decide with the
    # request's grounding context) under the effect-aware task.
    task = demo_live_task()
    live = server.requests[-4:]
    assert all(r["n"] == DEMO_N and r["tools"] and "structured_outputs" not in r for r in live)
    assert [d.truth for d in result.decisions] == [
        "tool_call", "tool_call", "request_for_info", "cannot_answer"
    ]  # fmt: skip
    for shown in result.decisions:
        decision = shown.decision
        q = np.array(list(decision.calibrated.values()))
        expected = q @ task.cost_matrix(decision.effect)
        np.testing.assert_allclose(list(decision.expected_cost.values()), expected)
        assert not decision.fallback
        assert q.sum() == pytest.approx(1.0)
        assert shown.tools
        bars = {"read": 0.5, "write": 0.9231, "irreversible": 0.973}
        assert shown.bar == pytest.approx(bars[str(decision.effect)])
    # The fake's signal is plain: the Paris read is made; the payment (irreversible) is
    # confirmed with the exact call unless its q clears 0.97 (on the fake's plain samples
    # the fitted map is sure of it); a question for the city; a refusal.
    weather, payment, ask, refuse = result.decisions
    assert [d.decision.action for d in (weather, ask, refuse)] == [
        "tool_call", "request_for_info", "cannot_answer"
    ]  # fmt: skip
    assert weather.reply == "get_weather(city='Paris', unit='celsius')"
    assert (weather.decision.effect, weather.decision.effect_source) == ("read", "task")
    assert weather.bar == 0.5
    assert payment.decision.effect == "irreversible" and payment.bar == pytest.approx(0.973)
    sure = payment.decision.calibrated["tool_call"] >= payment.bar
    assert payment.decision.action == ("tool_call" if sure else "confirm")
    call = "send_money(amount=50, currency='EUR', iban='DE89 3704 0044 0532 0130 00')"
    assert payment.reply == call if sure else str(payment.reply).startswith(f"I can call {call}")
    assert ask.decision.missing_arguments == ["city"]
    assert ask.decision.n_ungrounded
    assert "city" in str(ask.reply)
    assert refuse.reply in (REFUSAL, task.abstain_text)
    saved = json.loads((out / "demo.json").read_text())
    assert saved["format"] == DEMO_FORMAT
    assert saved["timings_s"] == result.timings
    assert list(saved["parts"]) == ["stsb", "tool_use"]
    assert [d["decision"]["action"] for d in saved["decisions"]] == [
        shown.decision.action for shown in result.decisions
    ]
    assert [d["reply"] for d in saved["decisions"]] == [s.reply for s in result.decisions]

    # A rerun resumes: only the live decisions reach the server.
    before = len(server.requests)
    again = run_demo(
        server.sampler(),
        out,
        model="fake/model",
        base_url=BASE_URL,
        stsb=stsb_items(N_STSB),
        permutations=0,
    )
    assert len(server.requests) - before == 4
    assert [p.n_sampled_now for p in again.parts] == [0, 0]
    assert again.parts[0].evaluation["permutation_test"] is None
    assert "stsb_shuffle_test" not in again.timings


def test_stsb_items_name_the_shared_data_variable_when_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SHARED_DATA_ENV, str(tmp_path))
    msg = (
        f"{tmp_path / 'stsb' / 'sts-dev.csv'}: taskcal demo needs the STS-B dev set for its "
        "first part and found no file there; set $TASKCAL_SHARED_DATA to the shared data "
        "folder (the one holding stsb/sts-dev.csv), or run the tool-use part only with "
        "--no-stsb."
    )
    with pytest.raises(DataFileError, match=re.escape(msg)):
        stsb_items()


def test_stsb_items_are_a_seeded_draw(shared_data: Path) -> None:
    first, second = stsb_items(N_STSB), stsb_items(N_STSB)
    assert [i.id for i in first] == [i.id for i in second]
    assert len(first) == N_STSB
    assert [i.id for i in stsb_items(10)] != [i.id for i in convert("stsb", None)[:10]]


@pytest.fixture
def fake_cli(shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> FakeServer:
    server = FakeServer(shared_data)
    monkeypatch.setattr(demo_cmd, "make_sampler", lambda *args: server.sampler())
    return server


def test_cli_demo_with_a_running_server(fake_cli: FakeServer, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = [
        "demo",
        "--base-url",
        BASE_URL,
        "--model",
        "fake",
        "--stsb-items",
        "12",
        "--stsb-seed",
        "1",
    ]
    result = CliRunner().invoke(app, [*args, "--permutations", "1", "--out-dir", str(out)])

    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "Part 1 — STS-B dev, 12 random sentence pairs" in text
    assert "Part 2 — 36 built-in tool-use requests" in text
    assert "label-shuffle p" in text
    assert "Live decisions" in text
    assert repr("What's the weather in Paris right now?") in text
    assert "Where the time went" in text
    for label in ("STS-B: one-pass beliefs", "tool use: evaluation", "total"):
        assert label in text
    saved = json.loads((out / "demo.json").read_text())
    assert saved["model"] == "fake"
    stsb = read_samples(out / "stsb.own_prompt.fake.samples.jsonl")
    assert set(stsb.records) == {i.id for i in stsb_items(12, seed=1)}
    assert set(stsb.records) != {i.id for i in stsb_items(12)}
    for decided in saved["decisions"]:
        action = decided["decision"]["action"]
        prefix = "call sent: " if action == "tool_call" else "reply: "
        shown = decided["reply"] if action == "tool_call" else repr(decided["reply"])
        assert prefix + shown in text
    assert "ungrounded call(s)" in text
    assert "The same requests decided by their tools' effects" in text
    for effect, bar in (("read", "0.50"), ("irreversible", "0.97")):
        line = f"effect of the call: {effect} (from the task); sent unconfirmed when "
        assert f"{line}q(tool_call) > {bar}" in text
    assert "model_preparation" not in saved["timings_s"]


def test_cli_demo_output_fits_100_columns_without_cutting_labels(
    fake_cli: FakeServer, tmp_path: Path
) -> None:
    from rich.cells import cell_len

    args = ["demo", "--base-url", BASE_URL, "--model", "fake", "--stsb-items", "12"]
    result = CliRunner().invoke(app, [*args, "--permutations", "1", "--out-dir", str(tmp_path)])

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(cell_len(line) for line in lines) <= 100  # a pipe gets 100 columns
    assert "…" not in result.stdout
    # The decoder tables show their names whole (twice: both parts), and the label column
    # of a live decision holds the longest label with the action mark.
    assert sum(line.startswith("│ mbr_dirichlet ") for line in lines) == 2
    assert sum(line.startswith("│ argmax_dirichlet ") for line in lines) == 2
    assert any(line.startswith("│ request_for_info  ← action │") for line in lines)


def test_cli_demo_no_stsb_runs_the_tool_use_part_only(fake_cli: FakeServer, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["demo", "--base-url", BASE_URL, "--no-stsb", "--permutations", "0"]
    result = CliRunner().invoke(app, [*args, "--show", "1", "--out-dir", str(out)])

    assert result.exit_code == 0, result.output
    assert "Part 1 — 36 built-in tool-use requests" in result.stdout
    saved = json.loads((out / "demo.json").read_text())
    assert list(saved["parts"]) == ["tool_use"]
    assert not any(key.startswith("stsb") for key in saved["timings_s"])
    assert len(saved["decisions"]) == 1
    assert len(fake_cli.requests) == 36 + 1


@pytest.mark.parametrize("fails", [False, True], ids=["succeeds", "fails"])
def test_cli_demo_closes_its_sampler(
    fails: bool, shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import taskcal_agents.workflow as demo_module

    server = FakeServer(shared_data)
    made: list[OpenAISampler] = []

    def make(*args: object) -> OpenAISampler:
        made.append(server.sampler())
        return made[-1]

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the demo broke")

    monkeypatch.setattr(demo_cmd, "make_sampler", make)
    if fails:
        monkeypatch.setattr(demo_module, "run_demo", broken)
    args = ["demo", "--base-url", BASE_URL, "--no-stsb", "--permutations", "0", "--show", "0"]
    result = CliRunner().invoke(app, [*args, "--out-dir", str(tmp_path / "out")])

    assert (result.exit_code != 0) is fails, result.output
    assert len(made) == 1
    assert made[0].closed


def test_cli_demo_missing_data_fails_before_any_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SHARED_DATA_ENV, str(tmp_path))

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("no model may be prepared or served without the data")

    monkeypatch.setattr(models, "prepare_model", refuse)
    monkeypatch.setattr(serving, "connect", refuse)
    monkeypatch.setattr(serving, "VLLMServer", refuse)
    result = CliRunner().invoke(app, ["demo", "--out-dir", str(tmp_path / "out")])

    assert result.exit_code == 2
    assert "$TASKCAL_SHARED_DATA" in result.stderr
    assert "--no-stsb" in result.stderr


def test_cli_demo_prepares_serves_and_stops_the_model_before_evaluating(
    fake_cli: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    calls: list[str] = []

    def prepare(model: str) -> Path:
        calls.append(f"prepare {model}")
        return tmp_path / "model"

    class Started:
        dtype_choice = DtypeChoice("float32", "the CPU has neither avx512_bf16 ...", "detected")
        base_url = BASE_URL

        def __init__(self, model: str | None = None) -> None:
            calls.append(f"serve {model}")
            self.model_name = str(model)

        def __enter__(self) -> Started:
            return self

        def __exit__(self, *exc: object) -> None:
            evaluated = (out / "tool_use.evaluation.json").exists()
            calls.append(f"stop (evaluated: {evaluated})")

    monkeypatch.setattr(models, "prepare_model", prepare)
    monkeypatch.setattr(serving, "VLLMServer", Started)
    args = ["demo", "--model", "smollm2-135m-instruct", "--no-stsb", "--permutations", "0"]
    result = CliRunner().invoke(app, [*args, "--out-dir", str(out)])

    assert result.exit_code == 0, result.output
    assert calls == [
        "prepare smollm2-135m-instruct",
        "serve smollm2-135m-instruct",
        "stop (evaluated: False)",
    ]
    assert "dtype float32 (the CPU has neither avx512_bf16" in " ".join(result.stderr.split()), (
        result.stderr
    )
    timings = json.loads((out / "demo.json").read_text())["timings_s"]
    assert list(timings)[:2] == ["model_preparation", "server_start"]
    assert "server_stop" in timings


def test_cli_demo_refuses_an_unknown_model_before_preparing(
    fake_cli: FakeServer, tmp_path: Path
) -> None:
    args = ["demo", "--model", "no-such-model", "--no-stsb", "--out-dir", str(tmp_path)]
    result = CliRunner().invoke(app, args)

    assert result.exit_code == 2
    assert "unknown model 'no-such-model'" in result.stderr


def test_demo_all_names_exist() -> None:
    import taskcal_agents.workflow._demo as module

    assert len(set(module.__all__)) == len(module.__all__)
    for name in module.__all__:
        assert hasattr(module, name), (
            f"taskcal_agents.workflow._demo.__all__ names missing {name!r}"
        )


def test_the_estimate_times_the_items_each_part_has_left(shared_data: Path, tmp_path: Path) -> None:
    server = FakeServer(shared_data)
    out = tmp_path / "out"
    seen: list[Estimate] = []

    def run(stsb: list[Any]) -> None:
        run_demo(
            server.sampler(),
            out,
            model="m",
            base_url=BASE_URL,
            stsb=stsb,
            permutations=0,
            show=0,
            on_estimate=seen.append,
        )

    # A first run samples both parts; a second, with more STS-B items, resumes it partway.
    run(stsb_items(N_STSB))
    assert len(seen) == 1
    assert set(seen[0].per_item) == {"stsb", "tool_use"}
    assert all(pace > 0 for pace in seen[0].per_item.values())
    assert seen[0].seconds > 0
    # A rerun with more STS-B items: the tool-use part is done and is not timed; STS-B is
    # timed on items it had not sampled (a resumed part is never counted as free).
    run(stsb_items(N_STSB + WARMUP_ITEMS["stsb"] + 4))
    assert len(seen) == 2
    assert set(seen[1].per_item) == {"stsb"}
    assert seen[1].per_item["stsb"] > 0
    # Nothing left: no estimate.
    run(stsb_items(N_STSB + WARMUP_ITEMS["stsb"] + 4))
    assert len(seen) == 2


def test_live_decisions_use_the_shipped_calibrator_of_the_model(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import taskcal_agents.decision._shipped as shipped
    from tests.unit_tests.taskcal_agents.helpers.calibration import shipped_artefact

    artefact = shipped_artefact()
    artefact.metadata["record"]["model"] = "fake/model"
    monkeypatch.setattr(shipped, "shipped_artefacts", lambda: (artefact,))
    server = FakeServer(shared_data)
    result = run_demo(server.sampler(), tmp_path, model="fake/model", base_url=BASE_URL,
                      stsb=None, permutations=0, show=2)  # fmt: skip
    live = server.requests[-2:]  # drawn as the shipped map's samples were
    assert [(r["n"], r["max_tokens"], r["temperature"]) for r in live] == [(16, 256, 1.0)] * 2
    assert all(r["n"] == DEMO_N and r["max_tokens"] == DEMO_MAX_TOKENS
               for r in server.requests[:-2])  # fmt: skip
    for shown in result.decisions:
        assert shown.calibrator == f"shipped calibrator {artefact.content_id}"
        assert shown.decision.calibrator_id == artefact.content_id
        assert shown.decision.n_samples == 16
    other = run_demo(server.sampler(), tmp_path / "other", model="other/model",
                     base_url=BASE_URL, stsb=None, permutations=0, show=1)  # fmt: skip
    assert other.decisions[0].calibrator == "Dirichlet map fitted on the other requests"
    assert other.decisions[0].decision.calibrator_id is None
