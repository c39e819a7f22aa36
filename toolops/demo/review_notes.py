"""What the demo's scripted reviewer and its callers share, importable without Django set
up (the scripted agent is a plain HTTP client): the run metadata it acts on, the note it
leaves, how it is started and what it says when ready."""

from __future__ import annotations

import time
from typing import TextIO

# What a run's metadata says to have its approvals decided by this script.
METADATA_KEY = "demo_reviewer"
AUTO = "auto"
NOTE = "approved by the demo's scripted reviewer"
USERNAME = "reviewer"
INTERVAL_S = 0.25
READY = "scripted reviewer ready"
# How `manage.py demo` and the tests start it (after the Python executable).
ARGS = ["-m", "toolops.demo.reviewer"]


def auto_metadata() -> dict[str, str]:
    """The metadata of a run whose approvals this script decides."""
    return {METADATA_KEY: AUTO}


def say(out: TextIO | None, line: str) -> None:
    if out is not None:
        out.write(f"{time.strftime('%H:%M:%S')} {line}\n")
        out.flush()
