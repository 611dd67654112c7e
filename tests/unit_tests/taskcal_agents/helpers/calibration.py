"""Calibrators for tests: a stand-in, a small fit, and a shipped calibrator's artefact."""

from __future__ import annotations

from typing import Any

import numpy as np

from calibrators import TemperatureScaling
from taskcal_agents.decision import _presets as presets
from taskcal_agents.decision._artefact import CalibratorArtefact
from taskcal_agents.parsing._relevance import RELEVANCE_FEATURES
from taskcal_agents.workflow._calibrate import calibrate_task


class FakeCalibrator:
    """A fitted calibrator stand-in: q ∝ p ** power (temperature-like), or a fixed row."""

    def __init__(self, k: int, power: float = 1.0, fixed: list[float] | None = None, **attrs: Any):
        self.n_classes_ = k
        self.classes_ = np.arange(k)
        self.power = power
        self.fixed = fixed
        self.calls: list[np.ndarray] = []
        for name, value in attrs.items():
            setattr(self, name, value)

    def predict_proba(self, P: np.ndarray) -> np.ndarray:
        self.calls.append(np.array(P))
        if self.fixed is not None:
            return np.array([self.fixed])
        q = np.asarray(P) ** self.power
        return q / q.sum(axis=1, keepdims=True)


def fitted() -> TemperatureScaling:
    P = np.array([[0.8, 0.1, 0.1], [0.2, 0.7, 0.1], [0.1, 0.2, 0.7], [0.6, 0.3, 0.1]])
    return TemperatureScaling().fit(P, [0, 1, 2, 1])


MODEL = "qwen2.5-coder-0.5b-instruct"
PROMPT = presets.TOOL_DECISION_PROMPT


def record(**sampling: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "sampling": {
            "task": "bfcl",
            "n": 16,
            "temperature": 1.0,
            "max_tokens": 256,
            "prompt": PROMPT,
            "dtype": "bfloat16",
            **sampling,
        },
        "data": {"corpus": "bfcl", "split": "train"},
        "command": "taskcal calibrate ...",
    }


def shipped_artefact(temperature: float = 2.0) -> CalibratorArtefact:
    cal = TemperatureScaling()
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(3), size=60)
    cal.fit(P, rng.integers(0, 3, size=60))
    cal.temperature_ = temperature  # a visible map: q differs from p̂
    return CalibratorArtefact(
        calibrator=cal, labels=list(calibrate_task().labels), alpha=0.1, task=calibrate_task(),
        metadata={"calibrator_name": "temperature", "record": record(),
                  "relevance_features": list(RELEVANCE_FEATURES),
                  "created": "2026-12-03T00:00:00+00:00"},
    )  # fmt: skip
