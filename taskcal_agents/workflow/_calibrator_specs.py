"""Calibrators named on the command line: ``"name:key=value:…"`` specs and their factories.

The workflow's calibrator defaults (:data:`WORKFLOW_CALIBRATOR_PARAMS`), the specs of
``taskcal evaluate --calibrators`` and ``taskcal fit --calibrator`` read into fresh-calibrator
factories.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from calibrators import CALIBRATOR_NAMES
from taskcal_agents.errors import ConfigurationError

__all__ = [
    "DEFAULT_CALIBRATORS",
    "TCE_CALIBRATOR",
    "WORKFLOW_CALIBRATOR_PARAMS",
    "CalibratorFactory",
    "default_factory",
    "parse_calibrator_spec",
]


NOT_EVALUATED_BY_DEFAULT = {
    "identity": "the raw belief, evaluated as mbr_raw",
    "logistic": "the multinomial logistic map on ln p̂ and raw extra columns, on request",
}
"""Registered maps the workflow does not cross-fit unless asked, and why."""

DEFAULT_CALIBRATORS = tuple(n for n in CALIBRATOR_NAMES if n not in NOT_EVALUATED_BY_DEFAULT)
"""Calibration maps evaluated by default: every registered map (``calibrators.CALIBRATOR_NAMES``)
but those in :data:`NOT_EVALUATED_BY_DEFAULT`."""


WORKFLOW_CALIBRATOR_PARAMS: dict[str, dict[str, Any]] = {
    "dirichlet": {
        "reg_lambda": "auto",
        "reg_mu": "auto",
        "reg_grid": (1e-2, 1e-1, 1.0, 10.0),
        "reg_mu_grid": (1e-2, 1.0),
        "cv": 3,
        "tol": 1e-5,
    },
}
"""Defaults of the workflow (``fit``, ``evaluate``) per calibrator name, under the
parameters of a spec: ``dirichlet`` is ODIR with ``reg_lambda`` and ``reg_mu`` chosen
jointly by 3-fold inner cross-validation over a 4 x 2 grid, optimiser tolerance 1e-5
(a small grid keeps the 200-shuffle label test affordable; ``dirichlet:reg_lambda=0``
and similar specs override these; ``matrix`` is the unregularised map)."""


TCE_CALIBRATOR = "dirichlet:reg_lambda=1:reg_mu=1"
"""The recalibration map of the cross-fitted ``tce`` column: ODIR at a fixed moderate
strength (one fit per fold; inner cross-validation for every decoder would cost more than
the column is worth)."""


CalibratorFactory = Callable[[], Any]


def parse_calibrator_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """Split ``"name:key=value:key=value"`` into the name and its parameters.

    Values are read as JSON when they parse (``0.01``, ``null``, ``true``), else kept as
    strings (``auto``). ``"dirichlet:reg_lambda=auto"`` → ``("dirichlet",
    {"reg_lambda": "auto"})``.

    Raises:
        ConfigurationError: A parameter is not ``key=value``.
    """
    import json

    name, *pairs = spec.split(":")
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            msg = (
                f"calibrator spec {spec!r}: parameters must be key=value, got {pair!r}; "
                "write e.g. 'dirichlet:reg_lambda=0.01'."
            )
            raise ConfigurationError(msg)
        try:
            params[key] = json.loads(raw)
        except json.JSONDecodeError:
            params[key] = raw
    return name.strip(), params


def default_factory(spec: str, **params: Any) -> CalibratorFactory:
    """A factory of fresh calibrators from a spec (see :func:`parse_calibrator_spec`).

    The workflow's defaults (:data:`WORKFLOW_CALIBRATOR_PARAMS`: ``dirichlet`` is ODIR
    with inner cross-validation) lie under the spec's parameters, which lie under
    *params*.

    Raises:
        ConfigurationError: The name or a parameter is unknown.
    """
    from calibrators import make_calibrator

    name, spec_params = parse_calibrator_spec(spec)
    merged = {**WORKFLOW_CALIBRATOR_PARAMS.get(name, {}), **spec_params, **params}
    try:
        make_calibrator(name, **merged)
    except (ValueError, TypeError) as exc:
        msg = f"cannot make calibrator {spec!r} with parameters {merged!r}: {exc}"
        raise ConfigurationError(msg) from exc

    def make() -> Any:
        return make_calibrator(name, **merged)

    return make
