"""The one int/number check (taskcal_agents._validation)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from taskcal_agents._validation import check_int, check_number
from taskcal_agents.errors import ConfigurationError


def test_check_int_accepts_ints_only() -> None:
    check_int(3, "X parameter 'n'", minimum=1)
    check_int(np.int64(2), "X parameter 'n'", minimum=1)
    check_int(None, "X parameter 'n'", optional=True)
    for bad in (0, True, 1.0, "2", None):
        msg = f"X parameter 'n' must be an int >= 1, got {bad!r}."
        with pytest.raises(ConfigurationError, match=f"^{re.escape(msg)}$"):
            check_int(bad, "X parameter 'n'", minimum=1)
    msg = "Y option 'k' must be an integer between 2 and 9 or None (levels), got 10; pass k=5."
    with pytest.raises(ConfigurationError, match=f"^{re.escape(msg)}$"):
        check_int(
            10, "Y option 'k'", minimum=2, maximum=9, optional=True, kind="an integer",
            note="levels", hint="pass k=5",
        )  # fmt: skip


def test_check_number_accepts_finite_reals_only() -> None:
    check_number(0, "X parameter 't'", minimum=0)
    check_number(np.float32(0.5), "X parameter 't'")
    check_number(None, "X parameter 't'", optional=True)
    for bad in (-1.0, float("inf"), float("nan"), False, "1"):
        msg = f"X parameter 't' must be a finite number >= 0 or None, got {bad!r}."
        with pytest.raises(ConfigurationError, match=f"^{re.escape(msg)}$"):
            check_number(bad, "X parameter 't'", minimum=0, optional=True)
