"""A person's look at a call's full (unredacted) args and result: read from the vault and
audited in one place, so no page can show them without leaving an audit entry behind
(toolops/audit/, action `full_args.read`). traces.FullArgsRead, where looks were kept
before the one audit log, is no longer written: migration toolops 0012 copied its rows
into the log, and the model stays for the `traces.view_full_args` permission it holds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from toolops.audit.services import Action, audit_record
from toolops.models import ToolCall

from . import sensitive, vault
from .models import FullArgsRead

PURPOSES = FullArgsRead.Purpose


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


def full_args_read(*, call: ToolCall, user: Any, purpose: str, request: Any = None) -> FullArgs:
    """The call's full args and result for `user`, audited. The caller has checked the
    user may see them (`traces.view_full_args`, or a reviewer on the call's approval)."""
    if purpose not in PURPOSES.values:
        raise ValueError(f"unknown purpose {purpose!r}")
    # Written before anything is decrypted: a look that fails halfway is still a look. No
    # savepoint: inside a request's transaction it is one INSERT, and it commits with it.
    with transaction.atomic(savepoint=False):
        audit_record(
            actor=user,
            action=Action.FULL_ARGS_READ,
            obj=call,
            request=request,
            detail={"purpose": purpose, "tool": call.tool},
            summary=f"Read the full args of {call.tool} ({PURPOSES(purpose).label})",
        )
    redacted = bool(call.result_sealed) or sensitive.has_mark(call.args)
    args, args_problem = vault.args_read(call)
    result, result_problem = vault.result_read(call)
    return FullArgs(
        args=args,
        result=result,
        redacted=redacted,
        args_problem=args_problem.reason if args_problem else "",
        result_problem=result_problem.reason if result_problem else "",
    )
