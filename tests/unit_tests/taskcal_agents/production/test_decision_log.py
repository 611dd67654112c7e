"""The decision log: both backends, concurrent writers, kill -9, failures, outcomes."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from taskcal_agents.decision._decider import Decision
from taskcal_agents.decision._presets import tool_decision
from taskcal_agents.errors import ConfigurationError, DecisionLogWarning, UnknownDecisionError
from taskcal_agents.langchain._chat_model import DECISION_METADATA_KEY, TaskCalibratedChatModel
from taskcal_agents.langchain._runnable import TaskCalibratedRunnable
from taskcal_agents.production._decision_log import (
    DecisionLog,
    JsonlDecisionLog,
    SqliteDecisionLog,
    artefact_id,
    import_outcomes,
    open_decision_log,
    record_outcome,
)

ROOT = Path(__file__).resolve().parents[4]
BACKENDS = ["log.jsonl", "log.sqlite"]


def _decision(action: str = "answer", p: float = 0.75) -> Decision:
    return Decision(
        task="qa",
        action=action,
        probs={"answer": p, "abstain": 1 - p},
        calibrated={"answer": p - 0.05, "abstain": 1.05 - p},
        expected_cost={"answer": 0.3, "abstain": 0.5},
        counts={"answer": 3.0, "abstain": 1.0},
        n_samples=5,
        n_unparsed=1,
        unguarded_action=action,
    )


@pytest.mark.parametrize("name", BACKENDS)
def test_round_trip(tmp_path: Path, name: str) -> None:
    log = open_decision_log(tmp_path / name)
    assert isinstance(log, JsonlDecisionLog if name.endswith("jsonl") else SqliteDecisionLog)
    first = log.append(_decision(), model_name="m", artefact_id="abc")
    second = log.append(_decision("abstain", 0.25))
    records = list(log.read())
    assert [r["id"] for r in records] == [first, second]
    rec = records[0]
    assert rec["task"] == "qa" and rec["model_name"] == "m" and rec["artefact_id"] == "abc"
    assert rec["labels"] == ["answer", "abstain"]
    assert rec["probs"] == {"answer": 0.75, "abstain": 0.25}
    assert rec["counts"] == {"answer": 3.0, "abstain": 1.0}
    assert rec["n_samples"] == 5 and rec["n_unparsed"] == 1 and rec["action"] == "answer"
    assert rec["fallback"] is False and rec["unguarded_action"] == "answer"
    assert rec["guarded"] is False and rec["outcome"] is None and "T" in rec["time"]
    record_outcome(tmp_path / name, first, "abstain")
    record_outcome(log, first, "answer")  # a later outcome replaces the earlier one
    joined = {r["id"]: r["outcome"] for r in log.read()}
    assert joined == {first: "answer", second: None}


@pytest.mark.parametrize("name", BACKENDS)
def test_outcome_errors(tmp_path: Path, name: str) -> None:
    log = open_decision_log(tmp_path / name)
    did = log.append(_decision())
    with pytest.raises(UnknownDecisionError, match="not in the decision log") as info:
        log.record_outcome("nope", "answer")
    assert isinstance(info.value, KeyError) and info.value.decision_id == "nope"
    with pytest.raises(ConfigurationError, match="not one of the task's labels"):
        log.record_outcome(did, "tool_call")
    report = import_outcomes(log, [(did, "answer"), ("nope", "answer"), (did, "bogus")])
    assert report.recorded == 1 and report.unknown == ["nope"]
    assert report.bad_labels == [(did, "bogus")] and report.rejected == 2


def test_unknown_suffix() -> None:
    with pytest.raises(ConfigurationError, match="suffix picks the backend"):
        open_decision_log("log.txt")


def test_torn_and_corrupt_lines_are_skipped(tmp_path: Path) -> None:
    log = JsonlDecisionLog(tmp_path / "log.jsonl")
    did = log.append(_decision())
    with open(log.path, "ab") as fh:
        fh.write(b'garbage\n{"type":"decision","id":"x')
    assert [r["id"] for r in log.read()] == [did]
    assert log.skipped == 2


_WRITER = textwrap.dedent(
    """
    import sys
    from taskcal_agents.production._decision_log import open_decision_log

    class D:  # a Decision's surface, without importing langchain in each writer
        task, probs = "qa", {"answer": 0.5, "abstain": 0.5}

        def model_dump(self, **_):
            return {"task": self.task, "action": "answer", "probs": self.probs}

    log = open_decision_log(sys.argv[1])
    for _ in range(int(sys.argv[2])):
        print(log.append(D(), model_name=sys.argv[3]), flush=True)
    """
)


def _writer(path: Path, n: int, tag: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), str(n), tag],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.mark.parametrize("name", BACKENDS)
def test_concurrent_writers(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    procs = [_writer(path, 200, f"w{i}") for i in range(4)]
    printed: set[str] = set()
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        printed |= set(out.split())
    log = open_decision_log(path)
    records = list(log.read())
    assert len(records) == 800 and {r["id"] for r in records} == printed
    assert sorted({r["model_name"] for r in records}) == ["w0", "w1", "w2", "w3"]
    if isinstance(log, JsonlDecisionLog):
        assert log.skipped == 0


@pytest.mark.parametrize("name", BACKENDS)
def test_kill_9_loses_nothing_acknowledged(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    proc = _writer(path, 100_000, "k")
    assert proc.stdout is not None
    acknowledged = [proc.stdout.readline().strip() for _ in range(30)]
    time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    rest, _ = proc.communicate(timeout=30)
    acknowledged += rest.split()
    assert proc.returncode == -signal.SIGKILL
    ids = {r["id"] for r in open_decision_log(path).read()}
    assert set(acknowledged) <= ids and len(acknowledged) >= 30


def _failing_logs(tmp_path: Path) -> list[DecisionLog]:
    directory = tmp_path / "dir.jsonl"
    directory.mkdir()
    locked = tmp_path / "locked.sqlite"
    return [JsonlDecisionLog(directory), SqliteDecisionLog(locked, timeout=0.01)]


def test_safe_append_warns_once_and_counts(tmp_path: Path) -> None:
    dir_log, locked = _failing_logs(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert dir_log.safe_append(_decision()) is None
        assert dir_log.safe_append(_decision()) is None
    assert dir_log.failures == 2
    assert [w.category for w in caught] == [DecisionLogWarning]
    locked.append(_decision())  # creates the database
    holder = sqlite3.connect(locked.path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.warns(DecisionLogWarning, match="could not be written"):
            assert locked.safe_append(_decision()) is None
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert locked.failures == 1
    assert locked.safe_append(_decision()) is not None


# ---------------------------------------------------------------- front doors


def _fake_model() -> FakeListChatModel:
    return FakeListChatModel(responses=["Which city?", "Which city?", "Which city?", "Sunny."])


@pytest.mark.parametrize("name", BACKENDS)
def test_runnable_logs_each_decision(tmp_path: Path, name: str) -> None:
    runnable = TaskCalibratedRunnable(
        _fake_model(), tool_decision(), n_samples=4, temperature=None, decision_log=tmp_path / name
    )
    decisions = runnable.batch(["What's the weather?", "And tomorrow?"])
    records = {r["id"]: r for r in open_decision_log(tmp_path / name).read()}
    assert [d.decision_id for d in decisions] == list(records)
    for d in decisions:
        rec = records[d.decision_id]
        assert rec["action"] == d.action and rec["calibrated"] == d.calibrated
        assert rec["task"] == "tool_decision" and rec["model_name"] == "fake-list-chat-model"
    assert TaskCalibratedRunnable(_fake_model(), tool_decision()).invoke("hi").decision_id is None


def test_runnable_survives_a_failing_log(tmp_path: Path) -> None:
    (tmp_path / "dir.jsonl").mkdir()
    runnable = TaskCalibratedRunnable(
        _fake_model(), tool_decision(), n_samples=4, temperature=None,
        decision_log=tmp_path / "dir.jsonl",
    )  # fmt: skip
    with pytest.warns(DecisionLogWarning, match="decision stands"):
        decision = runnable.invoke("What's the weather?")
    assert decision.action == "request_for_info" and decision.decision_id is None
    assert isinstance(runnable.decision_log, DecisionLog)
    assert runnable.decision_log.failures == 1


def test_chat_model_exposes_the_decision_id(tmp_path: Path) -> None:
    chat = TaskCalibratedChatModel(
        _fake_model(), tool_decision(), n_samples=4, temperature=None,
        decision_log=tmp_path / "log.db",
    )  # fmt: skip
    reply = chat.invoke("What's the weather?")
    decision_id = reply.response_metadata[DECISION_METADATA_KEY]["decision_id"]
    record_outcome(tmp_path / "log.db", decision_id, "request_for_info")
    [rec] = open_decision_log(tmp_path / "log.db").read()
    assert rec["id"] == decision_id and rec["outcome"] == "request_for_info"


def test_middleware_logs_each_decision(tmp_path: Path) -> None:
    from tests.unit_tests.taskcal_agents.helpers.middleware_fakes import (
        CALL,
        CountingHandler,
        make_request,
        middleware,
        unwrap,
    )

    mw = middleware(decision_log=str(tmp_path / "log.jsonl"))
    _, meta = unwrap(mw.wrap_model_call(make_request(), CountingHandler([CALL] * 4)))
    [rec] = open_decision_log(tmp_path / "log.jsonl").read()
    assert meta["decision_id"] == rec["id"] and rec["action"] == "tool_call"


def test_artefact_id_is_a_content_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    import datetime as dt
    import types

    import numpy as np

    from calibrators import IdentityCalibrator
    from taskcal_agents.decision import _artefact as artefact_module
    from taskcal_agents.decision._artefact import CalibratorArtefact

    task = tool_decision()

    def made(alpha: float, **metadata: str) -> CalibratorArtefact:
        calibrator = IdentityCalibrator().fit(np.eye(3), np.arange(3))
        return CalibratorArtefact(
            calibrator=calibrator, labels=list(task.labels), alpha=alpha, task=task,
            metadata=metadata,
        )  # fmt: skip

    a, b, c = artefact_id(made(0.5)), artefact_id(made(0.5)), artefact_id(made(1.0))
    assert a == b != c and a is not None and len(a) == 16
    assert artefact_id(None) is None
    # Without a recorded creation time the id does not depend on when it is computed ...
    later = dt.datetime(2031, 1, 1, tzinfo=dt.UTC)

    class Later(dt.datetime):
        @classmethod
        def now(cls, tz: dt.tzinfo | None = None) -> Later:  # type: ignore[override]
            return cls.fromtimestamp(later.timestamp(), tz)

    later_dt = types.SimpleNamespace(datetime=Later, UTC=dt.UTC)  # the module's _dt only
    monkeypatch.setattr(artefact_module, "_dt", later_dt)
    assert made(0.5).to_dict()["created"].startswith("2031")  # to_dict stamps the time ...
    assert artefact_id(made(0.5)) == a  # ... the id leaves it out
    # ... and a recorded one is content.
    first, second = made(0.5, created="2026-01-01"), made(0.5, created="2026-01-02")
    assert len({artefact_id(first), artefact_id(second), a}) == 3


def test_a_saved_artefact_has_the_id_of_its_file(tmp_path: Path) -> None:
    import numpy as np

    from calibrators import IdentityCalibrator
    from taskcal_agents.decision._artefact import CalibratorArtefact

    task = tool_decision()
    artefact = CalibratorArtefact(
        calibrator=IdentityCalibrator().fit(np.eye(3), np.arange(3)), labels=list(task.labels),
        alpha=0.1, task=task,
    )  # fmt: skip
    path = artefact.save(tmp_path / "fit.json")
    assert artefact_id(artefact) == artefact_id(CalibratorArtefact.load(path))


# ---------------------------------------------------------------- CLI


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_cli_outcomes_import(tmp_path: Path, fmt: str) -> None:
    from typer.testing import CliRunner

    from taskcal_agents.cli import app

    log = open_decision_log(tmp_path / "log.sqlite")
    first, second = log.append(_decision()), log.append(_decision())
    rows = [(first, "answer"), (second, "abstain")]
    good, bad = tmp_path / f"good.{fmt}", tmp_path / f"bad.{fmt}"
    for path, extra in ((good, []), (bad, [("nope", "answer"), (first, "bogus")])):
        if fmt == "csv":
            path.write_text("id,label\n" + "".join(f"{i},{lab}\n" for i, lab in rows + extra))
        else:
            path.write_text(
                "".join(json.dumps({"id": i, "label": lab}) + "\n" for i, lab in rows + extra)
            )
    runner = CliRunner()
    ok = runner.invoke(app, ["outcomes", "import", str(good), "--log", str(log.path)])
    assert ok.exit_code == 0, ok.output
    assert "recorded 2 outcome(s)" in ok.output
    assert {r["id"]: r["outcome"] for r in log.read()} == dict(rows)
    rejected = runner.invoke(app, ["outcomes", "import", str(bad), "--log", str(log.path)])
    assert rejected.exit_code == 1
    assert "unknown decision id: nope" in rejected.output
    assert f"label outside the task: {first} 'bogus'" in rejected.output
    assert "rejected 2 row(s)" in rejected.output
    missing = runner.invoke(
        app, ["outcomes", "import", str(tmp_path / "x.csv"), "--log", str(log.path)]
    )
    assert missing.exit_code == 2
