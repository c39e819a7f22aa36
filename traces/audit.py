"""A person's look at a call's full (unredacted) args and result: read from the vault and
audited in one place, so no page can show them without leaving a FullArgsRead behind."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolops.models import ToolCall

from . import sensitive, vault
from .models import FullArgsRead


@dataclass(frozen=True)
class FullArgs:
    args: Any
    result: Any
    # False when the stored args and result were never redacted: nothing was sealed.
    redacted: bool


def full_args_read(*, call: ToolCall, user: Any, purpose: str) -> FullArgs:
    """The call's full args and result for `user`, audited. The caller has checked the
    user may see them (`traces.view_full_args`, or a reviewer on the call's approval)."""
    if purpose not in FullArgsRead.Purpose.values:
        raise ValueError(f"unknown purpose {purpose!r}")
    FullArgsRead.objects.create(
        user=user if getattr(user, "pk", None) else None,
        call=call,
        call_ref=call.call_id,
        purpose=purpose,
    )
    redacted = bool(call.result_sealed) or sensitive.has_mark(call.args)
    return FullArgs(args=vault.args_open(call), result=vault.result_open(call), redacted=redacted)
