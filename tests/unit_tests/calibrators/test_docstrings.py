"""The Examples sections of the calibrators docstrings run and print what they show."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import calibrators

MODULES = sorted(
    name for _, name, _ in pkgutil.iter_modules(calibrators.__path__, prefix="calibrators.")
)


@pytest.mark.parametrize("module_name", MODULES)
def test_doctests(module_name):
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0
