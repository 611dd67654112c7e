"""An artefact the user chose is checked the way ``calibrator="auto"`` checks a shipped one.

:func:`check_artefact` (and ``resolve_calibrator(..., served=..., n_samples=...)``) applies
the shipped calibrators' ``mismatch`` rule to an explicit artefact: on what the front door
knows and what the artefact records; one that does not fit is still used, with a
``CalibratorMismatchWarning`` once per message, or refused with ``strict=True``.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

import taskcal_agents.decision._artefact as artefact_module
from taskcal_agents.decision import (
    CalibratorArtefact,
    CalibratorMismatchWarning,
    check_artefact,
    resolve_calibrator,
    tool_decision,
)
from taskcal_agents.decision._artefact import ServedSettings, mismatch
from taskcal_agents.errors import ConfigurationError
from tests.unit_tests.taskcal_agents.helpers.calibration import MODEL, fitted, shipped_artefact

SHIPPED_15B = "qwen2.5-coder-1.5b-instruct"
SHIPPED_15B_ID = "bb6b8e905995d9ad"  # cited in the docs: the file must not change
FIT = (
    "fit one for this setting with `taskcal calibrate --base-url URL --model NAME` (tool "
    "decisions) or `taskcal fit`"
)


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    artefact_module._MISMATCH_WARNED.clear()
    yield
    artefact_module._MISMATCH_WARNED.clear()


@pytest.fixture
def shipped_path() -> Path:
    """The package's own calibrator file of Qwen2.5-Coder-1.5B (fitted on N = 16)."""
    file = resources.files("taskcal_agents").joinpath("data", "calibrators", f"{SHIPPED_15B}.json")
    return Path(str(file))


def served(**changes: object) -> ServedSettings:
    """How the shipped calibrators' front door samples (the record's settings)."""
    return ServedSettings(SHIPPED_15B, 16, 1.0)._replace(**changes)


def test_an_explicit_artefact_of_another_n_warns_once_and_is_still_used(
    shipped_path: Path,
) -> None:
    message = (
        f"X: calibrator artefact {str(shipped_path)!r} ({SHIPPED_15B_ID}) does not fit this "
        "front door: it was fitted on N = 16 samples, this front door draws 4. It is still "
        f"used, because it was chosen explicitly: {FIT}, pass strict=True to refuse it, or "
        "ignore CalibratorMismatchWarning to use it silently."
    )
    with pytest.warns(CalibratorMismatchWarning, match=f"^{re.escape(message)}$") as caught:
        resolved = resolve_calibrator(shipped_path, tool_decision(), n_samples=4, owner="X")
    assert len(caught) == 1 and caught[0].filename == __file__  # the caller's line
    assert resolved.artefact is not None and resolved.artefact.content_id == SHIPPED_15B_ID
    assert resolved.calibrator is resolved.artefact.calibrator  # used: the user chose it
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per message
        resolve_calibrator(shipped_path, tool_decision(), n_samples=4, owner="X")


def test_strict_refuses_an_artefact_that_does_not_fit(shipped_path: Path) -> None:
    message = (
        f"X: calibrator artefact {str(shipped_path)!r} ({SHIPPED_15B_ID}) does not fit this "
        "front door: it was fitted on N = 16 samples, this front door draws 4. It was refused "
        f"(strict=True): {FIT}, or pass strict=False to use it anyway."
    )
    with pytest.raises(ConfigurationError, match=f"^{re.escape(message)}$"):
        resolve_calibrator(shipped_path, tool_decision(), n_samples=4, owner="X", strict=True)
    artefact = CalibratorArtefact.load(shipped_path)
    with pytest.raises(ConfigurationError, match=f"^{re.escape(message)}$"):
        check_artefact(artefact, tool_decision(), served(n_samples=4), owner="X", strict=True)


def test_a_matching_explicit_artefact_is_silent(shipped_path: Path) -> None:
    artefact = CalibratorArtefact.load(shipped_path)
    task = tool_decision()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resolve_calibrator(shipped_path, task, n_samples=16, owner="X")
        resolve_calibrator(artefact, task, served=served(), owner="X", strict=True)
        resolve_calibrator(artefact, task, owner="X")  # told nothing: nothing compared
        upstream = served(model="Qwen/Qwen2.5-Coder-1.5B-Instruct", registry_model=SHIPPED_15B)
        assert check_artefact(artefact, task, upstream, owner="X", strict=True) is None


def test_what_the_front_door_does_not_know_is_not_compared(shipped_path: Path) -> None:
    artefact = CalibratorArtefact.load(shipped_path)
    unknown = served(model=None, temperature=None)
    assert check_artefact(artefact, tool_decision(), unknown, owner="X", strict=True) is None
    # "auto" matches nothing it does not know.
    assert mismatch(artefact, tool_decision(), unknown) == (
        f"it was fitted for model {SHIPPED_15B!r}, this front door serves None"
    )


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"model": "other"}, f"fitted for model {SHIPPED_15B!r}, this front door serves 'other'"),
        ({"temperature": 0.7}, "fitted at temperature 1.0, this front door samples at 0.7"),
        ({"max_tokens": 64}, "fitted with max_tokens 256, this model is limited to 64"),
        ({"tool_choice": "any"}, "fitted with tool_choice 'auto', this front door sets 'any'"),
        ({"other": ("top_p",)}, "fitted with the server's default top_p, this model sets them"),
        ({"task_prompt": False}, "its task has prompt"),
    ],
)
def test_each_recorded_setting_is_compared_when_served_is_given(
    shipped_path: Path, changes: dict[str, object], why: str
) -> None:
    with pytest.warns(CalibratorMismatchWarning, match=f"fit this front door: .*{re.escape(why)}"):
        resolve_calibrator(shipped_path, tool_decision(), served=served(**changes), owner="X")
    with pytest.raises(ConfigurationError, match=re.escape(why)):
        resolve_calibrator(
            shipped_path, tool_decision(), served=served(**changes), owner="X", strict=True
        )


def test_an_artefact_without_a_record_is_compared_on_what_it_records(tmp_path: Path) -> None:
    task = tool_decision()
    artefact = shipped_artefact()
    del artefact.metadata["record"]
    artefact.metadata["samples"] = {"path": "s.jsonl", "n": 8, "temperature": 1.0, "model": MODEL}
    path = artefact.save(tmp_path / "fit.json")
    with pytest.warns(CalibratorMismatchWarning, match=r"'.*fit\.json' \(\w{16}\) does not fit"):
        resolve_calibrator(path, task, n_samples=16, owner="X")
    mine = ServedSettings(MODEL, 8, 1.0, max_tokens=10, tool_choice="required", other=("top_p",))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # max_tokens, tool_choice, top_p: not recorded
        resolve_calibrator(path, task, served=mine, owner="X")
    with pytest.warns(CalibratorMismatchWarning, match="fitted at temperature 1.0"):
        resolve_calibrator(path, task, served=mine._replace(temperature=0.5), owner="X")
    bare = CalibratorArtefact(calibrator=fitted(), labels=list(task.labels), alpha=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # it records no sampling: nothing to compare but α
        assert check_artefact(bare, task, ServedSettings("any", 3, 0.2), owner="X") is None
    with pytest.warns(CalibratorMismatchWarning, match=r"artefact \w{16} .*alpha 0.1, this"):
        check_artefact(bare, task, ServedSettings("any", 3, 0.2, alpha=0.5), owner="X")


def test_check_artefact_returns_the_message_and_warns_once() -> None:
    artefact = shipped_artefact()
    with pytest.warns(CalibratorMismatchWarning) as caught:
        first = check_artefact(
            artefact, tool_decision(), served(model=MODEL, n_samples=8), owner="Y"
        )
    assert first is not None and str(caught[0].message) == first
    assert first.startswith(f"Y: calibrator artefact {artefact.content_id} does not fit")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = check_artefact(
            artefact, tool_decision(), served(model=MODEL, n_samples=8), owner="Y"
        )
    assert again == first


def test_an_artefact_fitted_on_sampled_beliefs_does_not_fit_a_one_pass_door(
    shipped_path: Path,
) -> None:
    artefact = CalibratorArtefact.load(shipped_path)
    task = tool_decision()
    why = mismatch(artefact, task, served(belief="one_pass"))
    assert why == "it was fitted on sampled beliefs, this front door reads one-pass beliefs"
    # A one-pass artefact (its record says so) fits a one-pass door whatever its N, and
    # never a sampling one.
    data = artefact.to_dict()
    data["record"]["sampling"]["belief"] = "one_pass"
    one_pass = CalibratorArtefact.from_dict(data)
    assert mismatch(one_pass, task, served(belief="one_pass", n_samples=1)) is None
    assert mismatch(one_pass, task, served()) == (
        "it was fitted on one-pass beliefs, this front door reads sampled beliefs"
    )


def test_an_artefact_is_checked_for_the_belief_when_nothing_else_is_known(
    shipped_path: Path,
) -> None:
    # A door that knows only how it reads its belief (the middleware's tool-result
    # calibrator, a door whose model is known per request) still checks it.
    with pytest.warns(CalibratorMismatchWarning, match="fitted on sampled beliefs"):
        resolve_calibrator(shipped_path, tool_decision(), owner="X", belief="one_pass")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resolve_calibrator(shipped_path, tool_decision(), owner="X")  # told nothing
