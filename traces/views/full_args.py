"""A call's full (unredacted) args and result: `/console/calls/<call_id>/args/`.

Everywhere else the console shows args, results and errors redacted. This page is for
the few who need the real values (a support engineer reproducing a failed call): it needs
the permission `traces.view_full_args` (superusers have it) — or, for a call held for a
person, a reviewer judging it ("Show the full args" on its approval page, which itself
shows them redacted) — and every look is audited (an audit entry `full_args.read`,
toolops/audit/). It is never cached by the browser."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from toolops.models import ToolCall
from toolops.permissions import can_review, console_required
from toolops.views.common import HtmxHttpRequest, page_context, pretty
from traces.audit import full_args_read
from traces.models import FullArgsRead

PERMISSION = "traces.view_full_args"


@require_GET
@never_cache
@console_required
def call_args(request: HtmxHttpRequest, call_id: str) -> HttpResponse:
    permitted = request.user.has_perm(PERMISSION)
    # Refused before the call is even looked up: no permission, nothing to learn here.
    if not permitted and not can_review(request.user):
        raise PermissionDenied("Seeing a call's full args needs the permission view_full_args.")
    call = get_object_or_404(ToolCall.objects.select_related("run__agent"), call_id=call_id)
    purpose = FullArgsRead.Purpose.CONSOLE
    if not permitted:
        # A reviewer may read what a held call would send while it waits for a decision.
        if call.status != ToolCall.Status.PENDING_APPROVAL:
            raise PermissionDenied(
                "Seeing a call's full args needs the permission view_full_args (reviewers "
                "see them only while the call waits for a decision)."
            )
        purpose = FullArgsRead.Purpose.APPROVAL
    seen = full_args_read(call=call, user=request.user, purpose=purpose)
    ctx = page_context(
        request,
        "runs",
        call=call,
        redacted=seen.redacted,
        args_problem=seen.args_problem,
        result_problem=seen.result_problem,
        args_json=pretty(seen.args),
        result_json=pretty(seen.result),
    )
    return render(request, "traces/full_args.html", ctx)
