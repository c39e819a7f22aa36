"""What the executor refuses, as exceptions its callers turn into answers (the API into
409 and 400 problems, API.md)."""

from __future__ import annotations

from toolops.models import Run


class RunNotRunning(Exception):
    """The run has ended (or is past its budget): it takes no more calls."""

    def __init__(self, run: Run) -> None:
        super().__init__(f"run {run.run_id} is {run.status}; it takes no more calls")
        self.run = run


class ToolCallConflict(Exception):
    """A tool_call_id already used in the run for another call."""


class BadCallRequest(Exception):
    """A request that names something the run does not have (a `depends_on` id)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
