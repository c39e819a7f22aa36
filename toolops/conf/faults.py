"""Settings: the crash points of the fault tests (toolops/crash.py), inert unless set."""

from __future__ import annotations

import os

from toolops.crash import crash_plan
from toolops.envs import envint

# `name` or `name@probability`, comma-separated; a bad one stops the process at start.
TOOLOPS_CRASH_AT = crash_plan(os.getenv("TOOLOPS_CRASH_AT", ""))
TOOLOPS_CRASH_SEED = envint("TOOLOPS_CRASH_SEED", None)
