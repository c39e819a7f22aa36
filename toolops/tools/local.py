"""The Python transport: a registered function run with the same timeout discipline as
an HTTP tool.

An exception a tool did not mean to raise is a bug, and its text is the code's, not the
tool author's words for the model: a `TypeError: unsupported operand…` tells the model
nothing it can act on, and an exception's text may quote what the tool was working on (a
customer's address, a key). So the call's error and feedback say only that the tool failed
with an internal error; the exception goes to the log with its traceback (through the
redacting filter) and its type and text to the attempt (`Outcome.detail`), which the
operators see in the console. A `ToolError` is raised on purpose and keeps its message."""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable
from typing import Any

from toolops.tools.outcome import Failure, Outcome

log = logging.getLogger(__name__)

_pool = concurrent.futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="python-tool")

INTERNAL_ERROR = "it failed with an internal error, logged for ToolOps' operators"


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
        name = getattr(func, "__name__", repr(func))
        log.exception("Python tool %s raised %s", name, type(exc).__name__)
        detail = f"{type(exc).__name__}: {exc}"[:300]
        return Outcome(failure=Failure.ERROR, message=INTERNAL_ERROR, detail=detail)
    return Outcome(status=200, body=result)
