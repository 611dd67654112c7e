"""One way to check a scalar option: an int or a finite number in a range, never a bool.

Also the one way to put a pydantic ``ValidationError`` into our messages
(:func:`describe_validation_error`: ``"<field.path>: <problem>; ..."``).

Layer 0 (imports only :mod:`taskcal_agents.errors`). Each check names what it checks in
``subject`` (the owner and the parameter, e.g. ``"TaskCalibrationMiddleware parameter
'n_samples'"``) and raises :class:`~taskcal_agents.errors.ConfigurationError` with the
message ``"<subject> must be <kind> >= <minimum>[ or None][ (note)], got <value>[; hint]."``.
"""

from __future__ import annotations

import math
import numbers

from pydantic import ValidationError

from taskcal_agents.errors import ConfigurationError

__all__ = ["check_int", "check_number", "describe_validation_error"]


def describe_validation_error(
    exc: ValidationError, *, whole: str = "(record)", with_input: bool = False
) -> str:
    """``"<field.path>: <problem>; ..."`` for each error (``whole`` for the whole object).

    With ``with_input``, each problem ends with the value that arrived, ``(got ...)`` (its
    ``repr`` cut to 200 characters).
    """
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or whole
        part = f"{loc}: {err['msg']}"
        if with_input:
            shown = repr(err.get("input"))
            part += f" (got {shown if len(shown) <= 200 else shown[:197] + '...'})"
        parts.append(part)
    return "; ".join(parts)


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
) -> None:
    """Check that ``value`` is an int (not a bool) in ``[minimum, maximum]``.

    Args:
        value: The value to check.
        subject: Who checks what, e.g. ``"Foo parameter 'n'"``.
        minimum: The smallest value allowed, or ``None``.
        maximum: The largest value allowed, or ``None``.
        optional: Whether ``None`` is allowed.
        kind: How the message names the type (``"an int"``, ``"an integer"``).
        note: Text put in parentheses after the bound.
        hint: Text after the value, saying what to pass instead.

    Raises:
        ConfigurationError: If the value is not such an int.
    """
    if value is None and optional:
        return
    ok = not isinstance(value, bool) and isinstance(value, numbers.Integral)
    number = int(value) if ok else 0  # type: ignore[call-overload]
    if (
        not ok
        or (minimum is not None and number < minimum)
        or (maximum is not None and number > maximum)
    ):
        raise _fail(value, subject, kind, _bound(minimum, maximum), optional, note, hint)


def check_number(
    value: object,
    subject: str,
    *,
    minimum: float | None = None,
    optional: bool = False,
    kind: str = "a finite number",
    note: str = "",
    hint: str = "",
) -> None:
    """Check that ``value`` is a finite real number (not a bool) >= ``minimum``.

    Arguments and errors as :func:`check_int`.
    """
    if value is None and optional:
        return
    real = not isinstance(value, bool) and isinstance(value, numbers.Real)
    number = float(value) if real else math.nan  # type: ignore[arg-type]
    if not math.isfinite(number) or (minimum is not None and number < minimum):
        raise _fail(value, subject, kind, _bound(minimum, None), optional, note, hint)
