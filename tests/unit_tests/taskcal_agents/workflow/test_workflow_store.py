from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from taskcal_agents.errors import DataFileError
from taskcal_agents.workflow import SamplesStore, read_samples

HEADER = {
    "task": {"name": "t", "labels": ["a", "b"]},
    "settings": {"n": 4, "temperature": 1.0, "greedy": True, "max_tokens": 64, "model": "m"},
}


def _record(i: int, **kw: object) -> dict[str, object]:
    return {"id": f"id{i}", "label": "a", "labels": ["a", "b", None, "a"], **kw}


def test_create_append_read(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with SamplesStore.open(path, HEADER) as store:
        assert store.done == set()
        store.append(_record(0))
        store.append(_record(1))
    samples = read_samples(path)
    assert samples.header["format"] == "taskcal.samples"
    assert samples.header["format_version"] == 1
    assert samples.task == HEADER["task"]
    assert samples.settings == HEADER["settings"]
    assert list(samples.records) == ["id0", "id1"]
    assert samples.records["id1"]["labels"] == ["a", "b", None, "a"]
    assert samples.records["id1"]["type"] == "record"
    assert not samples.torn_tail
    assert path.read_bytes().count(b"\n") == 3


def test_resume_skips_done_ids(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with SamplesStore.open(path, HEADER) as store:
        store.append(_record(0))
    with SamplesStore.open(path, HEADER) as store:
        assert store.done == {"id0"}
        with pytest.raises(
            ValueError,
            match=re.escape(f"record id 'id0' is already stored in {path}; skip finished ids."),
        ):
            store.append(_record(0))
        store.append(_record(1))
    assert list(read_samples(path).records) == ["id0", "id1"]


def test_resuming_under_another_task_prompt_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    prompted = {**HEADER, "task": {**HEADER["task"], "prompt": "Rate it."}}
    with SamplesStore.open(path, prompted) as store:
        store.append(_record(0))
    with SamplesStore.open(path, prompted) as store:  # the same prompt resumes
        store.append(_record(1))
    with pytest.raises(DataFileError, match="beliefs drawn under two prompts would be mixed"):
        SamplesStore.open(path, HEADER)  # this run has no prompt; the file was written with one


def test_a_file_written_before_the_adaptive_artefact_was_recorded(tmp_path: Path) -> None:
    # Its header lacks the key; a run's settings now hold it (None without adaptive N).
    path = tmp_path / "s.jsonl"
    with SamplesStore.open(path, HEADER) as store:
        store.append(_record(0))
    now = {
        **HEADER,
        "settings": {**HEADER["settings"], "adaptive": None, "adaptive_artefact": None},
    }
    with SamplesStore.open(path, now) as store:  # not adaptive: resumes
        store.append(_record(1))
    # Sampled adaptively without the id: another run under an artefact is refused, and says why.
    old = {**HEADER, "settings": {**HEADER["settings"], "adaptive": 0.05}}
    adaptive = tmp_path / "a.jsonl"
    with SamplesStore.open(adaptive, old) as store:
        store.append(_record(0))
    new = {**old, "settings": {**old["settings"], "adaptive_artefact": "0123456789abcdef"}}
    with pytest.raises(DataFileError, match="sampled adaptively before the id was recorded"):
        SamplesStore.open(adaptive, new)


def test_torn_tail_is_ignored_then_repaired(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with SamplesStore.open(path, HEADER) as store:
        store.append(_record(0))
    line = json.dumps({"type": "record", **_record(1)})
    with path.open("ab") as fh:
        fh.write(line[:20].encode())
    samples = read_samples(path)
    assert samples.torn_tail
    assert list(samples.records) == ["id0"]
    with SamplesStore.open(path, HEADER) as store:
        assert store.done == {"id0"}
        store.append(_record(1))
    samples = read_samples(path)
    assert not samples.torn_tail
    assert list(samples.records) == ["id0", "id1"]


def test_torn_header_is_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"type": "hea')
    msg = (
        f"{path}:1: samples file has no complete header line (the writer was killed before it "
        "finished?); delete the file and run `taskcal sample` again."
    )
    with pytest.raises(DataFileError, match=re.escape(msg)):
        read_samples(path)
    with SamplesStore.open(path, HEADER) as store:
        store.append(_record(0))
    assert list(read_samples(path).records) == ["id0"]


def test_corrupt_middle_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with SamplesStore.open(path, HEADER) as store:
        store.append(_record(0))
    with path.open("ab") as fh:
        fh.write(b'{"type": "record", "id"\n')
        fh.write(json.dumps({"type": "record", **_record(2)}).encode() + b"\n")
    with pytest.raises(
        DataFileError, match=re.escape(f"{path}:3: line is not valid JSON (")
    ) as info:
        read_samples(path)
    assert str(info.value).endswith(
        "Delete the line: its item will be sampled again by `taskcal sample`."
    )
    assert info.value.line == 3


def test_duplicates_keep_first(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with SamplesStore.open(path, HEADER) as store:
        store.append(_record(0, label="a"))
    with path.open("ab") as fh:
        fh.write(json.dumps({"type": "record", **_record(0, label="b")}).encode() + b"\n")
    samples = read_samples(path)
    assert samples.records["id0"]["label"] == "a"
    assert samples.duplicates == ["id0"]


def test_other_task_or_settings_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    SamplesStore.open(path, HEADER).close()
    other = {**HEADER, "task": {"name": "u", "labels": ["a", "b"]}}
    msg = (
        f"{path}:1: samples file was written for task 't' with labels ['a', 'b'], but this run "
        "has task 'u' with labels ['a', 'b']; use another --out file."
    )
    with pytest.raises(DataFileError, match=re.escape(msg)):
        SamplesStore.open(path, other)
    other = {**HEADER, "settings": {**HEADER["settings"], "n": 8}}
    msg = (
        f"{path}:1: samples file was written with n=4, but this run has n=8; resume with the "
        "same settings or use another --out file."
    )
    with pytest.raises(DataFileError, match=re.escape(msg)):
        SamplesStore.open(path, other)


def test_bad_header_and_missing(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    msg = f"{path}: samples file not found; create it with `taskcal sample` or check the path."
    with pytest.raises(DataFileError, match=re.escape(msg)):
        read_samples(path)
    path.write_text('{"id": "x"}\n')
    with pytest.raises(
        DataFileError, match=re.escape(f"{path}:1: first line must be a 'taskcal.samples' header")
    ):
        read_samples(path)
    path.write_text(
        json.dumps({"type": "header", "format": "taskcal.samples", "format_version": 9}) + "\n"
    )
    msg = (
        f"{path}:1: format_version must be 1, got 9; re-create the file with this version "
        "of taskcal."
    )
    with pytest.raises(DataFileError, match=re.escape(msg)):
        read_samples(path)


def test_closed_store_and_bad_id(tmp_path: Path) -> None:
    store = SamplesStore.open(tmp_path / "s.jsonl", HEADER)
    with pytest.raises(ValueError, match=re.escape("record['id'] must be a string, got 3.")):
        store.append({"id": 3})
    store.close()
    store.close()
    with pytest.raises(RuntimeError, match=r"is closed; open it again to append\."):
        store.append(_record(0))


def test_second_writer_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with SamplesStore.open(path, HEADER):
        msg = (
            f"{path}: samples file is being written by another process; wait for it to "
            "finish or use another --out file."
        )
        with pytest.raises(DataFileError, match=re.escape(msg)):
            SamplesStore.open(path, HEADER)


_WRITER = textwrap.dedent(
    """
    import hashlib, sys
    from taskcal_agents.workflow import SamplesStore
    header = {"task": {"name": "t", "labels": ["a"]}, "settings": {"n": 1}}
    path, total = sys.argv[1], int(sys.argv[2])
    with SamplesStore.open(path, header) as store:
        print("ready", flush=True)
        for i in range(total):
            rid = f"id{i:04d}"
            if rid in store.done:
                continue
            payload = (rid * 40000)[: 150000 + i]
            digest = hashlib.sha256(payload.encode()).hexdigest()
            store.append({"id": rid, "payload": payload, "sha": digest})
    """
)


@pytest.mark.slow
def test_sigkill_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    """Kill a real writer with SIGKILL at arbitrary moments, rerun until done, check the file."""
    path = tmp_path / "s.jsonl"
    total = 400
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    counts = []
    for attempt in range(9):
        proc = subprocess.Popen(
            [sys.executable, str(script), str(path), str(total)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert proc.stdout is not None
        proc.stdout.readline()  # "ready": the store is open
        if attempt < 8:  # kill at an arbitrary moment
            time.sleep(0.003 * attempt)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            counts.append(len(read_samples(path).records))
        else:  # the last run finishes the job
            assert proc.wait(timeout=60) == 0
        proc.stdout.close()
    assert counts[-1] < total, "the writer finished before it was ever killed mid-way"
    assert counts == sorted(counts)
    samples = read_samples(path)
    assert not samples.torn_tail
    assert samples.duplicates == []
    assert list(samples.records) == [f"id{i:04d}" for i in range(total)]
    for record in samples.records.values():
        assert hashlib.sha256(record["payload"].encode()).hexdigest() == record["sha"]


def test_resume_with_logprob_choices(tmp_path: Path) -> None:
    # The run's settings hold a tuple of choices; the stored header a JSON list: still resumable.
    from taskcal_agents.decision._presets import rating
    from taskcal_agents.workflow import SampleSettings, sample_header

    settings = SampleSettings(n=1, model="m", belief="logprob", choices=("0", "1", "2"))
    header = sample_header(rating(k=3, low=0), settings, "d.jsonl")
    path = tmp_path / "s.jsonl"
    with SamplesStore.open(path, header) as store:
        store.append(_record(0))
    with SamplesStore.open(path, sample_header(rating(k=3, low=0), settings, "d.jsonl")) as store:
        assert store.done == {"id0"}
    other = SampleSettings(n=1, model="m", belief="logprob", choices=("a", "b", "c"))
    with pytest.raises(DataFileError, match="choices="):
        SamplesStore.open(path, sample_header(rating(k=3, low=0), other, "d.jsonl"))
