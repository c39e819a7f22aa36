"""Loaded at start-up by a Python process with this folder on its PYTHONPATH: its
application clock (django.utils.timezone.now, which ToolOps reads for every time it
writes or judges) runs TOOLOPS_TEST_CLOCK_OFFSET_S seconds off. A test process's tool
only (tests/faults/test_clock_skew.py says why not libfaketime); ToolOps has no such
switch."""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from django.utils import timezone

_offset = timedelta(seconds=float(os.environ.get("TOOLOPS_TEST_CLOCK_OFFSET_S", "0")))
_true_now = timezone.now


def _skewed_now() -> datetime:
    return _true_now() + _offset


timezone.now = _skewed_now
