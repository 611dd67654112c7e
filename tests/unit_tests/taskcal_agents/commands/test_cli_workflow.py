from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from taskcal_agents.cli import app
from taskcal_agents.commands import _sample as cmd
from taskcal_agents.datasets import write_dataset
from taskcal_agents.decision._presets import TOOL_DECISION_GROUNDING
from taskcal_agents.workflow import read_samples
from tests.unit_tests.taskcal_agents.helpers.workflow_fakes import (
    FakeSampler,
    ScriptedSampler,
    tool_items,
    tool_task,
)

REPO_ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A task file, a 30-item dataset and a fake sampler behind ``taskcal sample``."""
    task_path = tool_task().to_file(tmp_path / "task.yaml")
    data_path = tmp_path / "data.jsonl"
    write_dataset(tool_items(30), data_path)
    sampler = FakeSampler(signal=0.6)
    monkeypatch.setattr(cmd, "make_sampler", lambda *args: sampler)
    return {"task": task_path, "data": data_path, "dir": tmp_path}


def _sample_args(setup: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return [
        "sample",
        "--task",
        str(setup["task"]),
        "--data",
        str(setup["data"]),
        "--base-url",
        "http://fake/v1",
        "--model",
        "fake",
        "--n",
        "8",
        "--out",
        str(out),
        *extra,
    ]


def test_commands_are_registered(runner: CliRunner) -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in ("data", "sample", "fit", "evaluate", "report"):
        assert name in result.output
    result = runner.invoke(app, ["data", "--help"])
    assert "convert" in result.output
    assert "check" in result.output


def test_data_convert_and_check(runner: CliRunner, tmp_path: Path) -> None:
    src = tmp_path / "w.jsonl"
    rows = [
        {"uuid": f"u{i}", "question": "q", "correct_answer": label, "tools": []}
        for i, label in enumerate(["tool_call", "request_for_info", "cannot_answer"] * 3)
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    task_out = tmp_path / "when2call.yaml"
    result = runner.invoke(
        app,
        ["data", "convert", "when2call", "--source", str(src), "--out", str(out), "--limit",
         "3", "--task-out", str(task_out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"wrote task 'when2call' to {task_out}" in result.output
    # the data set's default task: tool_decision's defaults, the relevance features on
    assert tool_task(grounding=TOOL_DECISION_GROUNDING) == type(tool_task()).from_file(task_out)
    assert f"wrote 3 items to {out}: tool_call 1, request_for_info 1, cannot_answer 1" in (
        result.output
    )
    task = tool_task().to_file(tmp_path / "task.yaml")
    result = runner.invoke(app, ["data", "check", str(out), "--task", str(task)])
    assert result.exit_code == 0, result.output
    assert f"{out}: 3 items (0 with tools); labels: " in result.output


@pytest.mark.parametrize("seed", [[], ["--seed", "0"]], ids=["file-order", "seeded"])
def test_data_convert_balanced_writes_the_labels_interleaved(
    runner: CliRunner, tmp_path: Path, seed: list[str]
) -> None:
    # When2Call's file is grouped by label: its first 120 lines hold no tool_call
    src = tmp_path / "w.jsonl"
    grouped = ["cannot_answer"] * 10 + ["request_for_info"] * 10 + ["tool_call"] * 10
    rows = [
        {"uuid": f"u{i}", "question": f"q{i}", "correct_answer": label, "tools": []}
        for i, label in enumerate(grouped)
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    args = ["data", "convert", "when2call", "--source", str(src), "--out", str(out)]
    result = runner.invoke(app, [*args, "--limit", "12", "--balanced", *seed])
    assert result.exit_code == 0, result.output
    written = [json.loads(line) for line in out.read_text().splitlines()]
    labels = [row["label"] for row in written]
    assert labels == ["cannot_answer", "request_for_info", "tool_call"] * 4
    for label in set(labels):  # each label's items in the source's order
        ids = [int(row["id"][1:]) for row in written if row["label"] == label]
        assert ids == sorted(ids)
    assert "wrote 12 items" in result.output


def test_data_errors_name_file_and_line(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["data", "convert", "squad", "--out", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 2
    assert "error: converter name must be one of" in result.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"id": "a", "messages": [{"role": "user", "content": "x"}], "label": "z"}\n{"id"'
    )
    task = tool_task().to_file(tmp_path / "task.yaml")
    result = runner.invoke(app, ["data", "check", str(bad), "--task", str(task)])
    assert result.exit_code == 2
    assert f"{bad}:1: item 'a' has label 'z', which is not one of the task's labels" in " ".join(
        result.stderr.split()
    )


def test_sample_fit_evaluate_report(
    runner: CliRunner, setup: dict[str, Path], tmp_path: Path
) -> None:
    samples = tmp_path / "s.jsonl"
    result = runner.invoke(app, _sample_args(setup, samples, "--concurrency", "3"))
    assert result.exit_code == 0, result.output + result.stderr
    assert f"{samples}: 30 items sampled now, 0 already there, 0 failed (of 30)." in result.output
    assert len(read_samples(samples).records) == 30
    # a rerun has nothing to do
    result = runner.invoke(app, _sample_args(setup, samples))
    assert result.exit_code == 0
    assert "0 items sampled now, 30 already there" in result.output

    artefact = tmp_path / "cal.json"
    result = runner.invoke(
        app,
        ["fit", "--samples", str(samples), "--calibrator", "dirichlet", "--param",
         "reg_lambda=0.01", "-o", str(artefact), "--cv-folds", "3"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output + result.stderr
    data = json.loads(artefact.read_text())
    assert data["format"] == "taskcal.calibrator"
    assert data["format_version"] == 1
    assert data["task"] == "when2call"
    assert data["task_spec"]["cost"] == [[0.0, 1.0, 2.0], [4.0, 0.0, 2.0], [4.0, 1.0, 0.0]]
    assert data["labels"] == ["tool_call", "request_for_info", "cannot_answer"]
    assert data["calibrator"]["type"] == "DirichletCalibrator"
    assert data["calibrator"]["params"]["reg_lambda"] == 0.01
    assert data["fit_metrics"]["crossval"]["folds"] == 3
    assert data["samples"]["n"] == 8
    # the task keeps unparsed samples as evidence: Dirichlet reads the k + 1 features
    assert data["task_spec"]["unparsed"] == "other"
    assert data["fit_metrics"]["inputs"] == "features"
    assert data["calibrator"]["state"]["n_features_in_"] == 4
    assert "reads the unparsed share" in " ".join(result.output.split())
    # the middleware's loader reads the same artefact
    from taskcal_agents.decision._artefact import CalibratorArtefact

    loaded = CalibratorArtefact.load(artefact)
    assert (loaded.task_name, loaded.labels, loaded.alpha) == ("when2call", data["labels"], 0.1)

    evaluation = tmp_path / "eval.json"
    result = runner.invoke(
        app,
        ["evaluate", "--samples", str(samples), "--folds", "3", "--permutations", "19",
         "--calibrators", "temperature,dirichlet", "--out", str(evaluation)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output + result.stderr
    assert "mbr_dirichlet" in result.output
    assert "label-shuffle p = " in result.output
    assert "what the wrong-call cost buys" in result.output
    ev = json.loads(evaluation.read_text())
    # The task sends only grounded calls (the default), so the evaluation adds mbr_raw_any:
    # raw MBR where any sampled call may be sent, the baseline of the grounding rule.
    assert [d["decoder"] for d in ev["decoders"]] == [
        "constant",
        "greedy",
        "majority",
        "mbr_raw",
        "mbr_raw_any",
        "mbr_temperature",
        "mbr_dirichlet",
        "argmax_dirichlet",
    ]
    assert ev["permutation_test"]["n_permutations"] == 19
    assert ev["meta"]["n"] == 8
    inputs = {d["decoder"]: d.get("inputs") for d in ev["decoders"]}
    assert (inputs["mbr_temperature"], inputs["mbr_dirichlet"]) == ("probs", "features")

    report_dir = tmp_path / "report"
    result = runner.invoke(
        app, ["report", "--evaluation", str(evaluation), "--out-dir", str(report_dir)]
    )
    assert result.exit_code == 0, result.output + result.stderr
    assert sorted(p.name for p in report_dir.iterdir()) == [
        "cost_sweep.png",  # a tool decision: what the wrong-call cost buys
        "costs.png",
        "reliability.png",
        "risk_coverage.png",
        "summary.md",
    ]
    assert ev["cost_sweep"]["wrong_call_cost"] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    assert set(ev["cost_sweep"]["decoders"]) == {
        "constant", "mbr_raw", "mbr_temperature", "mbr_dirichlet"
    }  # fmt: skip


def test_fit_with_risk_control(runner: CliRunner, setup: dict[str, Path], tmp_path: Path) -> None:
    samples = tmp_path / "s.jsonl"
    assert runner.invoke(app, _sample_args(setup, samples)).exit_code == 0
    artefact = tmp_path / "guarded.json"
    args = ["fit", "--samples", str(samples), "--calibrator", "temperature", "--cv-folds", "3",
            "-o", str(artefact)]  # fmt: skip
    result = runner.invoke(
        app, [*args, "--risk-control", "tool_call_when_not:0.4", "--delta", "0.2"]
    )
    assert result.exit_code == 0, result.output + result.stderr
    data = json.loads(artefact.read_text())
    assert data["format_version"] == 2
    risk = data["risk_control"]
    assert (risk["spec"], risk["delta"], risk["n"]) == ("tool_call_when_not:0.4", 0.2, 30)
    assert risk["method"] == "ltt-binomial-fixed-sequence" and risk["certified"]
    text = " ".join(result.output.split())
    assert f"guard threshold {risk['threshold']:g}" in text
    assert "risk limit tool_call_when_not:0.4 certified at δ = 0.2 on 30 cross-fitted items" in text
    from taskcal_agents.decision._artefact import CalibratorArtefact
    from taskcal_agents.decision._decider import Decider

    loaded = CalibratorArtefact.load(artefact)
    assert loaded.risk_control is not None and loaded.task is not None
    assert Decider(loaded.task, loaded.calibrator, risk_control=loaded.risk_control)
    # a spec that does not fit the task fails before any fit
    result = runner.invoke(app, [*args, "--risk-control", "answer_wrong:0.1"])
    assert result.exit_code == 2
    assert "error: risk spec 'answer_wrong:0.1' names action 'answer', but task 'when2call'" in (
        " ".join(result.stderr.split())
    )
    result = runner.invoke(app, [*args, "--risk-control", "tool_call_when_not:0.01"])
    assert result.exit_code == 0, result.output + result.stderr
    assert "could not be certified" in " ".join(result.stderr.split())
    assert json.loads(artefact.read_text())["risk_control"]["threshold"] is None


def test_sample_needs_server(runner: CliRunner, setup: dict[str, Path], tmp_path: Path) -> None:
    args = [a for a in _sample_args(setup, tmp_path / "s.jsonl") if a not in ("--base-url",)]
    args.remove("http://fake/v1")
    result = runner.invoke(app, args, env={"TASKCAL_BASE_URL": ""})
    assert result.exit_code == 2
    assert "error: --base-url and --model are required (or set $TASKCAL_BASE_URL and " in (
        " ".join(result.stderr.split())
    )


def test_sample_failures_exit_1_and_rerun_retries(
    runner: CliRunner, setup: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    samples = tmp_path / "s.jsonl"
    monkeypatch.setattr(cmd, "make_sampler", lambda *a: FakeSampler(fail_ids=["item-007"]))
    result = runner.invoke(app, _sample_args(setup, samples))
    assert result.exit_code == 1
    assert "29 items sampled now, 0 already there, 1 failed (of 30)." in result.output
    assert "Run the same command again to retry: finished items are kept." in result.stderr
    monkeypatch.setattr(cmd, "make_sampler", lambda *a: FakeSampler())
    result = runner.invoke(app, _sample_args(setup, samples))
    assert result.exit_code == 0
    assert "1 items sampled now, 29 already there, 0 failed (of 30)." in result.output


def test_sample_summarises_unparsed_reasons_and_warns_on_length_cuts(
    runner: CliRunner, setup: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cmd, "make_sampler", lambda *a: ScriptedSampler())
    result = runner.invoke(app, _sample_args(setup, tmp_path / "s.jsonl", "--max-tokens", "16"))
    assert result.exit_code == 0
    assert (
        "unparsed samples: 150 of 240 (unoffered_tool 60, length 30, empty 30, other 30)."
        in " ".join(result.output.split())
    )
    assert (
        "warning: 120 of 240 samples (50%) ended on the length limit (--max-tokens 16); "
        "raise --max-tokens so that completions are not cut off."
    ) in " ".join(result.stderr.split())


def test_sample_does_not_warn_without_length_cuts(
    runner: CliRunner, setup: dict[str, Path], tmp_path: Path
) -> None:
    result = runner.invoke(app, _sample_args(setup, tmp_path / "s.jsonl"))
    assert result.exit_code == 0
    assert "length limit" not in result.stderr
    assert "unparsed samples: " in result.output  # FakeSampler leaves some samples empty
    assert "(empty " in result.output


def test_fit_and_evaluate_refuse_another_task(
    runner: CliRunner, setup: dict[str, Path], tmp_path: Path
) -> None:
    samples = tmp_path / "s.jsonl"
    assert runner.invoke(app, _sample_args(setup, samples)).exit_code == 0
    from taskcal_agents.decision import _presets as tasks

    other = tasks.answer_or_abstain().to_file(tmp_path / "other.yaml")
    for command in (["fit", "-o", str(tmp_path / "c.json")], ["evaluate"]):
        result = runner.invoke(app, [*command, "--samples", str(samples), "--task", str(other)])
        assert result.exit_code == 2
        assert (
            f"error: samples file {samples} was written for task 'when2call' with labels"
            in " ".join(result.stderr.split())
        )
    # a resumed sample run with another task is refused too
    result = runner.invoke(
        app, [*_sample_args(setup, samples)[:2], str(other), *_sample_args(setup, samples)[3:]]
    )
    assert result.exit_code == 2


def test_evaluate_target_risk(runner: CliRunner, setup: dict[str, Path], tmp_path: Path) -> None:
    samples = tmp_path / "s.jsonl"
    for bad in ("0", "-0.5", "nan", "inf"):
        result = runner.invoke(app, ["evaluate", "--samples", str(samples), "--target-risk", bad])
        assert result.exit_code == 2
        assert f"error: --target-risk must be a finite number > 0, got {float(bad)!r}." in (
            " ".join(result.stderr.split())
        )
    assert runner.invoke(app, _sample_args(setup, samples)).exit_code == 0
    evaluation = tmp_path / "eval.json"
    result = runner.invoke(
        app,
        ["evaluate", "--samples", str(samples), "--folds", "3", "--permutations", "0",
         "--calibrators", "temperature", "--target-risk", "0.5", "--out", str(evaluation)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output + result.stderr
    assert json.loads(evaluation.read_text())["meta"]["target_risk"] == 0.5


def test_evaluate_jobs(runner: CliRunner, setup: dict[str, Path], tmp_path: Path) -> None:
    samples = tmp_path / "s.jsonl"
    assert runner.invoke(app, _sample_args(setup, samples)).exit_code == 0
    args = ["evaluate", "--samples", str(samples), "--folds", "3", "--permutations", "4",
            "--calibrators", "temperature", "--test-calibrator", "temperature"]  # fmt: skip
    result = runner.invoke(app, [*args, "--jobs", "0"])
    assert result.exit_code == 2
    assert (
        "error: jobs must be a number of processes >= 1, or negative (-1: all cores), got 0."
        in " ".join(result.stderr.split())
    )
    outputs = []
    for jobs in ("1", "2"):
        out = tmp_path / f"eval{jobs}.json"
        result = runner.invoke(app, [*args, "--jobs", jobs, "--out", str(out)])
        assert result.exit_code == 0, result.output + result.stderr
        outputs.append(json.loads(out.read_text())["permutation_test"])
    assert outputs[0] == outputs[1]


def test_report_on_bad_file(runner: CliRunner, tmp_path: Path) -> None:
    bad = tmp_path / "eval.json"
    bad.write_text('{"format": "x"}')
    result = runner.invoke(app, ["report", "--evaluation", str(bad), "--out-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert f"error: {bad}: not an evaluation file: expected format 'taskcal.evaluation'." in (
        " ".join(result.stderr.split())
    )


_RUN_CLI = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests!r})
    from taskcal_agents.commands import _sample as cmd
    from taskcal_agents.cli import app
    from unit_tests.taskcal_agents.helpers.workflow_fakes import FakeSampler

    class Slow(FakeSampler):
        def sample(self, *args, **kwargs):
            time.sleep(0.2)
            return super().sample(*args, **kwargs)

    cmd.make_sampler = lambda *a: Slow()
    app(sys.argv[1:])
    """
)


@pytest.mark.slow
def test_sigkill_of_taskcal_sample(setup: dict[str, Path], tmp_path: Path) -> None:
    """`taskcal sample` killed by SIGKILL at arbitrary moments, rerun: nothing lost or doubled."""
    script = tmp_path / "run_cli.py"
    script.write_text(_RUN_CLI.format(tests=str(REPO_ROOT / "tests")))
    samples = tmp_path / "s.jsonl"
    args = [sys.executable, str(script), *_sample_args(setup, samples, "--concurrency", "4")]
    env = {**os.environ, "COLUMNS": "120"}
    counts = []
    for threshold in (3, 10, 18):  # kill once this many records are on disk
        proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if samples.exists() and len(read_samples(samples).records) >= threshold:
                break
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        counts.append(len(read_samples(samples).records))
    final = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
    assert final.returncode == 0, final.stderr
    samples_file = read_samples(samples)
    assert samples_file.duplicates == []
    assert not samples_file.torn_tail
    assert sorted(samples_file.records) == [f"item-{i:03d}" for i in range(30)]
    assert counts == sorted(counts)
    assert counts[0] >= 3 and counts[-1] < 30, f"not killed mid-run: {counts}"


def test_sample_adaptive_stops_early_and_records_where(
    runner: CliRunner, setup: dict[str, Path], tmp_path: Path
) -> None:
    full, adaptive = tmp_path / "full.jsonl", tmp_path / "adaptive.jsonl"
    result = runner.invoke(app, _sample_args(setup, full))
    assert result.exit_code == 0, result.output + result.stderr
    artefact = tmp_path / "cal.json"
    fit = ["fit", "--samples", str(full), "--calibrator", "temperature", "-o", str(artefact)]
    result = runner.invoke(app, fit)
    assert result.exit_code == 0
    assert "adaptive N's stopping prior: total concentration" in result.output
    # 30 items: the prior is fitted and stored, with a warning
    said = " ".join(result.stderr.split())
    assert "warning: adaptive N's stopping prior is fitted on 30 items" in said
    # --adaptive needs the calibrator it decides by
    result = runner.invoke(app, _sample_args(setup, adaptive, "--adaptive", "0.05"))
    assert result.exit_code == 2
    assert "--adaptive 0.05 needs --artefact FIT.json" in " ".join(result.stderr.split())
    args = _sample_args(setup, adaptive, "--adaptive", "0.05", "--artefact", str(artefact))
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output + result.stderr
    records = read_samples(adaptive).records.values()
    stops = [r["stopped_at"] for r in records]
    assert all(len(r["samples"]) == len(r["labels"]) == r["stopped_at"] for r in records)
    assert set(stops) <= {4, 8} and min(stops) == 4 and sum(stops) < 8 * len(stops)
    assert all(r["change_probability"] < 0.05 for r in records if r["stopped_at"] < 8)
    assert "stopped_at" not in next(iter(read_samples(full).records.values()))
    # resuming with another epsilon is refused; the same one resumes
    result = runner.invoke(app, [*args[:-4], "--adaptive", "0.1", "--artefact", str(artefact)])
    assert result.exit_code == 2
    assert "adaptive=0.05" in result.stderr
    # ... and so is another artefact (another calibrator fitted on the same samples)
    other = tmp_path / "other.json"
    fit = ["fit", "--samples", str(full), "--calibrator", "vector", "-o", str(other)]
    assert runner.invoke(app, fit).exit_code == 0
    result = runner.invoke(app, [*args[:-1], str(other)])
    assert result.exit_code == 2
    said = " ".join(result.stderr.split())
    assert "adaptive_artefact=" in said and "the --artefact adaptive N stops by" in said
    result = runner.invoke(app, args)
    assert "0 items sampled now, 30 already there" in result.output


class _ClosingSampler(FakeSampler):
    """A fake sampler that records whether the command closed it."""

    closed = False

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("fail", [False, True])
def test_sample_closes_its_client(
    runner: CliRunner,
    setup: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fail: bool,
) -> None:
    # An unclosed client leaves its sockets to the garbage collector (ResourceWarning).
    sampler = _ClosingSampler(fail_ids=["item-007"] if fail else [])
    monkeypatch.setattr(cmd, "make_sampler", lambda *a: sampler)
    result = runner.invoke(app, _sample_args(setup, tmp_path / "s.jsonl"))
    assert result.exit_code == (1 if fail else 0)
    assert sampler.closed


def test_sample_closes_its_client_when_the_store_cannot_open(
    runner: CliRunner, setup: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sampler = _ClosingSampler()
    monkeypatch.setattr(cmd, "make_sampler", lambda *a: sampler)
    out = tmp_path / "s.jsonl"
    out.write_text('{"not": "a samples header"}\n')
    result = runner.invoke(app, _sample_args(setup, out))
    assert result.exit_code == 2, result.output
    assert sampler.closed


@pytest.mark.parametrize(
    "extra", [["--batch-size", "2"], ["--parse-tasks", "3"], ["--ray-address", "auto"]]
)
def test_sample_refuses_ray_options_on_the_local_engine(
    runner: CliRunner, setup: dict[str, Path], tmp_path: Path, extra: list[str]
) -> None:
    result = runner.invoke(app, _sample_args(setup, tmp_path / "s.jsonl", *extra))
    assert result.exit_code == 2
    assert f"{extra[0]} need --engine ray." in " ".join(result.stderr.split())
    assert not (tmp_path / "s.jsonl").exists()
