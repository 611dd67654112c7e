"""One way to check a scalar option: an int or a finite number in a range, never a bool.

Layer 0 (imports only :mod:`taskcal_agents.errors`). Each check names what it checks in
``subject`` (the owner and the parameter, e.g. ``"TaskCalibrationMiddleware parameter
'n_samples'"``) and raises :class:`~taskcal_agents.errors.ConfigurationError` with the
message ``"<subject> must be <kind> >= <minimum>[ or None][ (note)], got <value>[; hint]."``.
"""

from __future__ import annotations

import math
import numbers
from typing import Literal, overload

from taskcal_agents.errors import ConfigurationError

__all__ = ["check_int", "check_number"]


def _fail(
    value: object, subject: str, kind: str, bound: str, optional: bool, note: str, hint: str
) -> ConfigurationError:
    none = " or None" if optional else ""
    note = f" ({note})" if note else ""
    hint = f"; {hint}" if hint else ""
    return ConfigurationError(f"{subject} must be {kind}{bound}{none}{note}, got {value!r}{hint}.")


def _bound(minimum: float | None, maximum: float | None) -> str:
    if minimum is not None and maximum is not None:
        return f" between {minimum} and {maximum}"
    if minimum is not None:
        return f" >= {minimum}"
    if maximum is not None:
        return f" <= {maximum}"
    return ""


@overload
def check_int(
    value: object,
    subject: str,
    *,
    minimum: int | None = ...,
    maximum: int | None = ...,
    optional: Literal[False] = ...,
    kind: str = ...,
    note: str = ...,
    hint: str = ...,
) -> int: ...
@overload
def check_int(
    value: object,
    subject: str,
    *,
    minimum: int | None = ...,
    maximum: int | None = ...,
    optional: bool,
    kind: str = ...,
    note: str = ...,
    hint: str = ...,
) -> int | None: ...
def check_int(
    value: object,
    subject: str,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    optional: bool = False,
    kind: str = "an int",
    note: str = "",
    hint: str = "",
) -> int | None:
    """Return ``value`` if it is an int (not a bool) in ``[minimum, maximum]``.

    Args:
        value: The value to check.
        subject: Who checks what, e.g. ``"Foo parameter 'n'"``.
        minimum: The smallest value allowed, or ``None``.
        maximum: The largest value allowed, or ``None``.
        optional: Whether ``None`` is allowed (and returned).
        kind: How the message names the type (``"an int"``, ``"an integer"``).
        note: Text put in parentheses after the bound.
        hint: Text after the value, saying what to pass instead.

    Raises:
        ConfigurationError: If the value is not such an int.
    """
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _fail(value, subject, kind, _bound(minimum, maximum), optional, note, hint)
    number = int(value)
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        raise _fail(value, subject, kind, _bound(minimum, maximum), optional, note, hint)
    return number


@overload
def check_number(
    value: object,
    subject: str,
    *,
    minimum: float | None = ...,
    optional: Literal[False] = ...,
    kind: str = ...,
    note: str = ...,
    hint: str = ...,
) -> float: ...
@overload
def check_number(
    value: object,
    subject: str,
    *,
    minimum: float | None = ...,
    optional: bool,
    kind: str = ...,
    note: str = ...,
    hint: str = ...,
) -> float | None: ...
def check_number(
    value: object,
    subject: str,
    *,
    minimum: float | None = None,
    optional: bool = False,
    kind: str = "a finite number",
    note: str = "",
    hint: str = "",
) -> float | None:
    """Return ``value`` as a float if it is a finite real number (not a bool) >= ``minimum``.

    Arguments and errors as :func:`check_int`.
    """
    if value is None and optional:
        return None
    number = float(value) if isinstance(value, numbers.Real) else math.nan
    if (
        isinstance(value, bool)
        or not math.isfinite(number)
        or (minimum is not None and number < minimum)
    ):
        raise _fail(value, subject, kind, _bound(minimum, None), optional, note, hint)
    return number
