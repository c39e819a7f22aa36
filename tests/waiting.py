"""Waiting in tests: poll a condition until it holds, or fail after a deadline. Never a
fixed sleep: too short on a busy machine (a flaky test), too long on an idle one. Imports
nothing of ToolOps, so any test helper may use it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T],
    timeout: float = 30.0,
    *,
    every: float = 0.05,
    failure: Callable[[], str] | str = "",
) -> T:
    """The first truthy value of `condition()`, polled every `every` s; the test fails
    after `timeout` s, with `failure` (text, or a function making it, e.g. a log)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            detail = failure() if callable(failure) else failure
            pytest.fail(f"not true within {timeout:g} s: {detail or condition}")
        time.sleep(every)
