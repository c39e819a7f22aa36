"""Idempotency keys are made by ToolOps, never by the model (DESIGN.md)."""

from __future__ import annotations

import hashlib


def idempotency_key(*, run_id: str, step_index: int, tool: str, canonical_args: bytes) -> str:
    material = f"{run_id}:{step_index}:{tool}:".encode() + canonical_args
    return hashlib.sha256(material).hexdigest()


def client_reference(key: str) -> str:
    """The business reference a downstream without idempotency support stores under a
    unique index: derived from the key, so a replay carries the same reference."""
    return "tops-" + key[:32]
