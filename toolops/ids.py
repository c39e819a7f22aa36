"""The ids ToolOps makes: trace and span ids (W3C), and call ids that sort by time."""

from __future__ import annotations

import secrets
import time
import uuid


def new_trace_id() -> str:
    return uuid.uuid4().hex


def new_span_id() -> str:
    return secrets.token_hex(8)


def time_ordered_id(prefix: str, random_hex: int) -> str:
    """`prefix` + the time in milliseconds (12 hex digits) + `random_hex` random hex
    digits. Ids made one after another sort one after another, so their unique index
    grows at its right edge instead of taking random inserts all over a large B-tree
    (what a call id made of uuid4 cost with 10 million calls: bench/flat.py)."""
    return f"{prefix}{time.time_ns() // 1_000_000:012x}{secrets.token_hex(random_hex // 2)}"


def new_call_id() -> str:
    return time_ordered_id("c-", 20)


def new_tool_call_id() -> str:
    return time_ordered_id("tc-", 12)
