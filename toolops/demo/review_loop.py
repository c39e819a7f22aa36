"""The scripted reviewer's loop (toolops/demo/reviewer.py): every `interval_s`, approve
as the demo's `reviewer` login what waits in runs marked ``{"demo_reviewer": "auto"}``.

Each decision goes through `approval_decide`, as a person's does. Imported by
``python -m toolops.demo.reviewer`` once Django is set up.
"""

from __future__ import annotations

import threading
from typing import TextIO

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import DatabaseError, close_old_connections, connection
from django.utils import timezone

from toolops.approvals.services import DecisionRefused, approval_decide
from toolops.demo.review_notes import AUTO, INTERVAL_S, METADATA_KEY, NOTE, READY, USERNAME, say
from toolops.models import Approval


def waiting_approvals(reviewer: User) -> list[Approval]:
    """Pending approvals of auto-reviewed runs that this reviewer may still approve."""
    # An approval past its expiry is the expiry task's: approving it would be refused.
    return list(
        Approval.objects.pending()
        .filter(run__metadata__demo_reviewer=AUTO, expires_at__gt=timezone.now())
        .exclude(votes__reviewer=reviewer)
        .select_related("run")
        .order_by("created_at", "pk")[:50]
    )


def review_once(*, reviewer: User, out: TextIO | None = None) -> int:
    """Approve what waits now; how many were approved."""
    approved = 0
    for approval in waiting_approvals(reviewer):
        try:
            approval_decide(
                approval=approval,
                by=reviewer,
                approve=True,
                note=NOTE,
                args_hash=approval.args_hash,
            )
        except DecisionRefused as refused:
            # A person (or the expiry task, or an abort) was quicker: theirs stands.
            say(out, f"left {approval.approval_id}: {refused}")
            continue
        approved += 1
        say(out, f"approved {approval.approval_id}: {approval.tool} in run {approval.run.run_id}")
    return approved


def serve(
    *,
    stop: threading.Event,
    username: str = USERNAME,
    interval_s: float = INTERVAL_S,
    out: TextIO | None = None,
) -> None:
    """Look for approvals to decide every `interval_s` until `stop` is set."""
    reviewer = None
    say(
        out,
        f"{READY}: approving as {username!r} what waits in runs with metadata "
        f'{{"{METADATA_KEY}": "{AUTO}"}}',
    )
    while not stop.is_set():
        try:
            if reviewer is None:
                reviewer = get_user_model().objects.filter(username=username).first()
                if reviewer is None:
                    say(out, f"no user {username!r} yet; looking again in 2 s")
                    stop.wait(2.0)
                    continue
            review_once(reviewer=reviewer, out=out)
        except DatabaseError as exc:
            # SQLite busy for longer than its timeout, or the database restarting: the
            # next look tries again on a fresh connection.
            say(out, f"database error, trying again: {exc}")
            connection.close()
        close_old_connections()
        stop.wait(interval_s)
    connection.close()
