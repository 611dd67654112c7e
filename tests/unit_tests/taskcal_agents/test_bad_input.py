"""Bad input, property-based: every mutated file ends in our error naming the file, or loads.

Valid files (a task from :mod:`taskcal_agents.decision._presets`, artefacts written by
:meth:`CalibratorArtefact.save` after a real fit, a dataset, a samples file written by the
sampling workflow) are mutated by hypothesis: keys dropped, values replaced by other types,
NaN and infinities, labels permuted, bytes truncated. Each case must either raise
:class:`~taskcal_agents.errors.DataFileError` (or another :class:`TaskCalError` at the
check against the task) naming the file, or load into something that decides soundly:
finite calibrated probabilities that sum to one, labels in the task's order.

Loading never executes code: no pickle, YAML only through ``safe_load``, and a parser is
named by a file only when the user's code registered it.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calibrators import (
    DirichletCalibrator,
    HistogramBinning,
    IsotonicCalibrator,
    MatrixScaling,
    TemperatureScaling,
    VectorScaling,
    from_dict,
)
from taskcal_agents.datasets import read_dataset
from taskcal_agents.decision._artefact import CalibratorArtefact, resolve_calibrator
from taskcal_agents.decision._task import Task
from taskcal_agents.errors import DataFileError, LabelMismatchError, TaskCalError
from taskcal_agents.workflow import (
    SampleSettings,
    SamplesStore,
    read_samples,
    run_sampling,
    sample_header,
)
from taskcal_agents.workflow._data import load_eval_arrays
from tests.unit_tests.taskcal_agents.helpers.workflow_fakes import (
    FakeSampler,
    tool_items,
    tool_task,
)

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])

# ------------------------------------------------------------------------------ mutations

ODD_VALUES: list[Any] = [
    None,
    True,
    0,
    -1,
    2,
    1e308,
    -0.5,
    math.nan,
    math.inf,
    -math.inf,
    "",
    "x",
    "nan",
    [],
    [[]],
    [1],
    [math.nan],
    [[math.inf, 0.0]],
    {},
    {"a": 1},
]


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside a JSON tree (the root excluded)."""
    out: list[tuple[Any, ...]] = []
    items = (
        obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    )
    for key, value in items:
        out.append((*prefix, key))
        out.extend(_paths(value, (*prefix, key)))
    return out


def _get(obj: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        obj = obj[key]
    return obj


@st.composite
def mutated(draw: st.DrawFn, original: Any, n_max: int = 3) -> Any:
    """``original`` with 1..n_max mutations: drop a key, replace a value, NaN, permute."""
    data = copy.deepcopy(original)
    for _ in range(draw(st.integers(1, n_max))):
        paths = _paths(data)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent, key = _get(data, path[:-1]), path[-1]
        op = draw(st.sampled_from(["drop", "replace", "replace", "scale", "permute"]))
        if op == "drop":
            del parent[key]
        elif op == "replace":
            parent[key] = copy.deepcopy(draw(st.sampled_from(ODD_VALUES)))  # never shared
        elif op == "scale" and isinstance(parent[key], int | float):
            parent[key] = draw(st.sampled_from([math.nan, math.inf, -math.inf, -1.0, 0.0]))
        elif op == "permute" and isinstance(parent[key], list) and len(parent[key]) > 1:
            parent[key] = draw(st.permutations(parent[key]))
    return data


def _truncations(text: bytes) -> st.SearchStrategy[bytes]:
    """Proper prefixes that cut into the content (not just its trailing whitespace)."""
    return st.integers(0, len(text.rstrip()) - 1).map(lambda n: text[:n])


def _names_file(exc: BaseException, path: Path) -> None:
    assert isinstance(exc, DataFileError), repr(exc)
    assert exc.path == str(path)
    assert str(path) in str(exc)


# ------------------------------------------------------------------------------- the task

TASK = tool_task()
PROBE = np.array(
    [[1 / 3, 1 / 3, 1 / 3], [0.98, 0.01, 0.01], [0.01, 0.98, 0.01], [0.2, 0.3, 0.5]],
    dtype=np.float64,
)


def _task_dict() -> dict[str, Any]:
    return {"format_version": 1, **TASK.model_dump(mode="json")}


def _load_task(tmp_path: Path, data: Any, suffix: str) -> Task | None:
    path = tmp_path / f"task{suffix}"
    text = json.dumps(data) if suffix == ".json" else yaml.safe_dump(data, allow_unicode=True)
    path.write_text(text, encoding="utf-8")
    try:
        return Task.from_file(path)
    except DataFileError as exc:
        _names_file(exc, path)
        return None


@EXAMPLES
@given(data=mutated(_task_dict()), suffix=st.sampled_from([".json", ".yaml"]))
def test_mutated_task_file(tmp_path: Path, data: Any, suffix: str) -> None:
    task = _load_task(tmp_path, data, suffix)
    if task is not None:  # loaded: a sound task
        cost = task.cost_matrix()
        assert cost.shape == (len(task.labels), len(task.action_list))
        assert np.all(np.isfinite(cost))
        assert np.all(cost >= 0)
        assert task.default_action in task.action_list


@EXAMPLES
@given(data=st.data())
def test_truncated_task_file(tmp_path: Path, data: st.DataObject) -> None:
    path = tmp_path / "task.json"
    full = json.dumps(_task_dict(), indent=2).encode()
    path.write_bytes(data.draw(_truncations(full)))
    with pytest.raises(DataFileError) as info:
        Task.from_file(path)
    _names_file(info.value, path)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.pop("labels"), "labels"),
        (lambda d: d.update(cost="free"), "cost"),
        (lambda d: d.update(cost=[[0, 1, math.nan]] * 3), "cost"),
        (lambda d: d.update(labels=["a", "a"]), "labels"),
        (lambda d: d.update(parser={"name": "tool_decision", "options": {"x": 1}}), "parser"),
        (lambda d: d.update(unknown=1), "unknown"),
        (lambda d: d.update(format_version=2), "format_version"),
    ],
)
def test_bad_task_file_names_file_and_field(
    tmp_path: Path, mutate: Callable[[dict[str, Any]], Any], field: str
) -> None:
    data = _task_dict()
    mutate(data)
    path = tmp_path / "task.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DataFileError) as info:
        Task.from_file(path)
    _names_file(info.value, path)
    assert field in str(info.value)


# ---------------------------------------------------------------------------- no code runs


def test_task_file_naming_os_system_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    for suffix in (".json", ".yaml"):
        data = _task_dict()
        data["parser"] = {"name": "os:system", "options": {"command": f"touch {marker}"}}
        assert _load_task(tmp_path, data, suffix) is None
    assert not marker.exists()


def test_artefact_task_spec_naming_os_system_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    data = _artefact_dict("temperature")
    data["task_spec"]["parser"] = {"name": "os:system", "options": {"command": f"touch {marker}"}}
    path = tmp_path / "a.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DataFileError, match=re.escape("was not registered")) as info:
        CalibratorArtefact.load(path)
    _names_file(info.value, path)
    assert not marker.exists()


def test_yaml_task_file_with_python_tags_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "task.yaml"
    path.write_text(f'name: !!python/object/apply:os.system ["touch {marker}"]\n', "utf-8")
    with pytest.raises(DataFileError, match=re.escape("cannot read task file")) as info:
        Task.from_file(path)
    _names_file(info.value, path)
    assert not marker.exists()


def test_no_loading_path_can_execute_code() -> None:
    """No pickle, no unsafe YAML, no eval/exec in the library (only ast.literal_eval)."""
    banned = re.compile(
        r"^\s*(import|from)\s+(pickle|cloudpickle|dill|marshal|shelve)\b"
        r"|\b(pickle|joblib|dill|marshal)\.loads?\(|yaml\.load\(|yaml\.unsafe_load"
        r"|yaml\.full_load|yaml\.Loader\b|(?<![.\w])eval\(|\bexec\(|__import__\("
    )
    offenders = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for package in ("taskcal_agents", "calibrators")
        for path in sorted((ROOT / package).rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if banned.search(line) and not line.lstrip().startswith(("#", '"""'))
    ]
    assert offenders == []
    # import_module only for the lazy exports and the moved import paths.
    importers = sorted(
        str(path.relative_to(ROOT))
        for package in ("taskcal_agents", "calibrators")
        for path in (ROOT / package).rglob("*.py")
        if "import_module(" in path.read_text(encoding="utf-8")
    )
    assert importers == [
        "taskcal_agents/_compat.py",
        "taskcal_agents/_exports.py",
    ]


# ------------------------------------------------------------------------------ artefacts


def _fitted(kind: str) -> Any:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, size=90)
    P = rng.dirichlet(np.ones(3), size=90)
    P[np.arange(90), y] += 1.0
    P /= P.sum(axis=1, keepdims=True)
    make = {
        "temperature": TemperatureScaling,
        "vector": VectorScaling,
        "matrix": MatrixScaling,
        "dirichlet": lambda: DirichletCalibrator(reg_lambda=1e-2),
        "isotonic": IsotonicCalibrator,
        "histogram": lambda: HistogramBinning(n_bins=4),
    }[kind]
    return make().fit(P, y)


KINDS = ["temperature", "vector", "matrix", "dirichlet", "isotonic", "histogram"]
_ARTEFACTS = {
    kind: CalibratorArtefact(
        calibrator=_fitted(kind),
        labels=list(TASK.labels),
        alpha=0.5,
        task_name=TASK.name,
        task=TASK,
    ).to_dict()
    for kind in KINDS
}


def _artefact_dict(kind: str) -> dict[str, Any]:
    return copy.deepcopy(_ARTEFACTS[kind])


def _check_loaded(path: Path) -> None:
    """Load ``path``: our error naming it, or a calibrator that decides soundly."""
    try:
        artefact = CalibratorArtefact.load(path)
    except DataFileError as exc:
        _names_file(exc, path)
        return
    try:
        resolved = resolve_calibrator(artefact, TASK, owner="test")
    except TaskCalError:
        return
    assert artefact.labels == list(TASK.labels)
    assert resolved.calibrator is not None
    assert math.isfinite(resolved.alpha)
    assert resolved.alpha >= 0  # α = 0 is allowed: raw frequencies
    Q = resolved.calibrator.predict_proba(PROBE)
    assert Q.shape == PROBE.shape
    assert np.all(np.isfinite(Q))
    assert np.all((Q >= 0) & (Q <= 1))
    np.testing.assert_allclose(Q.sum(axis=1), 1.0, atol=1e-9)


@EXAMPLES
@given(data=st.data(), kind=st.sampled_from(KINDS))
def test_mutated_artefact(tmp_path: Path, data: st.DataObject, kind: str) -> None:
    mutant = data.draw(mutated(_artefact_dict(kind)))
    path = tmp_path / "a.json"
    path.write_text(json.dumps(mutant, allow_nan=True), encoding="utf-8")
    _check_loaded(path)


@EXAMPLES
@given(data=st.data(), kind=st.sampled_from(KINDS))
def test_mutated_calibrator_state(tmp_path: Path, data: st.DataObject, kind: str) -> None:
    """Mutations aimed at the calibrator's coefficients and shapes."""
    original = _artefact_dict(kind)
    original["calibrator"] = data.draw(mutated(original["calibrator"], n_max=2))
    path = tmp_path / "a.json"
    path.write_text(json.dumps(original, allow_nan=True), encoding="utf-8")
    _check_loaded(path)


@EXAMPLES
@given(data=st.data(), kind=st.sampled_from(KINDS))
def test_truncated_artefact(tmp_path: Path, data: st.DataObject, kind: str) -> None:
    path = tmp_path / "a.json"
    CalibratorArtefact.from_dict(_artefact_dict(kind)).save(path)
    path.write_bytes(data.draw(_truncations(path.read_bytes())))
    with pytest.raises(DataFileError) as info:
        CalibratorArtefact.load(path)
    _names_file(info.value, path)


@EXAMPLES
@given(order=st.permutations(list(TASK.labels)), kind=st.sampled_from(KINDS))
def test_artefact_labels_in_another_order_are_refused(
    tmp_path: Path, order: list[str], kind: str
) -> None:
    data = _artefact_dict(kind)
    data["labels"] = order
    path = tmp_path / "a.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    if order == list(TASK.labels):
        resolve_calibrator(path, TASK, owner="test")
        return
    with pytest.raises(DataFileError, match=re.escape("disagree with its 'task_spec'")):
        CalibratorArtefact.load(path)  # its own task_spec says otherwise
    data["task_spec"] = None
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(LabelMismatchError, match=re.escape(str(path))):
        resolve_calibrator(path, TASK, owner="test")  # the runtime task says otherwise


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(d: dict[str, Any]) -> None:
        _get(d, path[:-1])[path[-1]] = value

    return mutate


@pytest.mark.parametrize(
    ("kind", "mutate", "field"),
    [
        ("temperature", _set(("calibrator", "state", "temperature_"), math.nan), "temperature_"),
        ("temperature", _set(("calibrator", "state", "temperature_"), -1.0), "temperature_"),
        ("dirichlet", _set(("calibrator", "state", "coef_", 0, 0), math.nan), "coef_"),
        ("matrix", _set(("calibrator", "state", "intercept_", 1), math.inf), "intercept_"),
        ("matrix", _set(("calibrator", "state", "coef_"), [[1.0, 0.0]]), "coef_"),
        ("vector", _set(("calibrator", "state", "n_classes_"), 2), "coef_"),
        ("isotonic", _set(("calibrator", "state", "y_thresholds_", 0, 0), 5.0), "y_thresholds_"),
        ("histogram", _set(("calibrator", "state", "bin_values_", 0), [0.5]), "bin_values_"),
        ("temperature", _set(("format_version",), 99), "format_version"),
        ("temperature", _set(("labels",), ["tool_call", "tool_call", "x"]), "labels"),
        ("temperature", _set(("alpha",), math.nan), "alpha"),
        ("temperature", _set(("alpha",), -1.0), "alpha"),
        ("temperature", lambda d: d.pop("labels"), "labels"),
        ("temperature", lambda d: d.pop("calibrator"), "calibrator"),
    ],
)
def test_bad_artefact_names_file_and_field(
    tmp_path: Path, kind: str, mutate: Callable[[dict[str, Any]], Any], field: str
) -> None:
    data = _artefact_dict(kind)
    mutate(data)
    path = tmp_path / "a.json"
    path.write_text(json.dumps(data, allow_nan=True), encoding="utf-8")
    with pytest.raises(DataFileError) as info:
        CalibratorArtefact.load(path)
    _names_file(info.value, path)
    assert field in str(info.value)


@pytest.mark.parametrize("kind", KINDS)
def test_calibrator_from_dict_refuses_nan_state(kind: str) -> None:
    """The lowest layer: calibrators.from_dict itself refuses non-finite fitted state."""
    d = _artefact_dict(kind)["calibrator"]
    for name, value in d["state"].items():
        if isinstance(value, float):
            d["state"][name] = math.nan
        elif isinstance(value, list):
            first = value[0]
            while isinstance(first, list) and isinstance(first[0], list | float):
                value, first = first, first[0]
            value[0] = math.nan
        else:
            continue
        with pytest.raises(ValueError, match=re.escape(name)):
            from_dict(d)
        return
    pytest.skip(f"{kind} has no float state")  # pragma: no cover


# ------------------------------------------------------------------------------- datasets


def _dataset_lines() -> list[dict[str, Any]]:
    return [item.model_dump(mode="json") for item in tool_items(4)]


@EXAMPLES
@given(data=st.data())
def test_mutated_dataset_line(tmp_path: Path, data: st.DataObject) -> None:
    lines = _dataset_lines()
    i = data.draw(st.integers(0, len(lines) - 1))
    lines[i] = data.draw(mutated(lines[i]))
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(x, allow_nan=True) + "\n" for x in lines), "utf-8")
    try:
        items = read_dataset(path, labels=TASK.labels)
    except DataFileError as exc:
        _names_file(exc, path)
        assert exc.line is None or 1 <= exc.line <= len(lines)
        return
    assert all(item.label in TASK.labels for item in items)
    assert len({item.id for item in items}) == len(items)


@EXAMPLES
@given(data=st.data())
def test_truncated_dataset(tmp_path: Path, data: st.DataObject) -> None:
    path = tmp_path / "d.jsonl"
    raw = (
        "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in _dataset_lines())
        .replace("request", "requête")
        .encode()
    )
    path.write_bytes(data.draw(_truncations(raw)))
    try:
        read_dataset(path, labels=TASK.labels)
    except DataFileError as exc:
        _names_file(exc, path)


# ---------------------------------------------------------------------------- samples files


@pytest.fixture(scope="module")
def samples_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("samples") / "s.jsonl"
    settings_ = SampleSettings(n=4)
    with SamplesStore.open(path, sample_header(TASK, settings_, None)) as store:
        run_sampling(TASK, tool_items(6), FakeSampler(), store, settings_)
    return path.read_bytes()


def _check_samples(path: Path) -> None:
    try:
        _, _, arrays = load_eval_arrays(path, TASK)
    except DataFileError as exc:
        _names_file(exc, path)
        return
    except TaskCalError:
        return  # e.g. the header's task differs from TASK (named by resolve_task)
    assert np.all(np.isfinite(arrays.P))
    np.testing.assert_allclose(arrays.P.sum(axis=1), 1.0)


@EXAMPLES
@given(data=st.data())
def test_mutated_samples_record(tmp_path: Path, data: st.DataObject, samples_bytes: bytes) -> None:
    lines = samples_bytes.splitlines()
    i = data.draw(st.integers(0, len(lines) - 1))
    lines[i] = json.dumps(data.draw(mutated(json.loads(lines[i]))), allow_nan=True).encode()
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    _check_samples(path)


@EXAMPLES
@given(data=st.data())
def test_truncated_samples_file(tmp_path: Path, data: st.DataObject, samples_bytes: bytes) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(data.draw(_truncations(samples_bytes)))
    try:
        samples = read_samples(path)
    except DataFileError as exc:
        _names_file(exc, path)
        return
    assert samples.records.keys() <= {item.id for item in tool_items(6)}
    _check_samples(path)


def test_a_finite_but_absurd_coefficient_is_refused(tmp_path: Path) -> None:
    # found by the property test: coef_ 1e308 loaded, then overflowed in predict_proba
    data = _artefact_dict("vector")
    data["calibrator"]["state"]["coef_"][0][0] = 1e308
    path = tmp_path / "a.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DataFileError, match=r"'coef_' with a value beyond 1e\+12") as info:
        CalibratorArtefact.load(path)
    _names_file(info.value, path)
