"""The Python transport: a registered function run with the same timeout discipline as
an HTTP tool."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any

from toolops.tools.outcome import Failure, Outcome

_pool = concurrent.futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="python-tool")


class ToolError(Exception):
    """Raise from a Python tool to fail the call; `retryable=True` when trying again may
    succeed (a flaky dependency), False when it never will (bad input, not found)."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


def call(func: Callable[..., Any], args: dict[str, Any], *, timeout_s: float) -> Outcome:
    future = _pool.submit(func, **args)
    try:
        result = future.result(timeout=timeout_s)
    except concurrent.futures.TimeoutError:
        return Outcome(failure=Failure.TIMEOUT, message=f"no result within {timeout_s:g} s")
    except ToolError as exc:
        return Outcome(failure=Failure.ERROR, message=str(exc)[:300], retryable=exc.retryable)
    except Exception as exc:  # noqa: BLE001 - any bug in tool code ends as a fatal failure
        return Outcome(failure=Failure.ERROR, message=f"{type(exc).__name__}: {exc}"[:300])
    return Outcome(status=200, body=result)
