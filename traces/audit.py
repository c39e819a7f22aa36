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
    # Why the args or the result shown are the redacted ones: they could not be decrypted
    # (a page must say so, never pass placeholders off as the real values). "" if not.
    args_problem: str = ""
    result_problem: str = ""


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
    args, args_problem = vault.args_read(call)
    result, result_problem = vault.result_read(call)
    return FullArgs(
        args=args, result=result, redacted=redacted,
        args_problem=args_problem.reason if args_problem else "",
        result_problem=result_problem.reason if result_problem else "",
    )  # fmt: skip
