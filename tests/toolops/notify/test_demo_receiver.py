"""`make demo`'s webhook receiver (toolops/demo/hook.py): added in the console's store as
the reviewers' and the operators' webhook in place of an earlier demo's, it checks each
message's signature and says it in one line; the banner names its address; it stops."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from django.utils import timezone

from toolops.demo import hook as demo_hook
from toolops.models import AuditEntry, NotificationDelivery, NotificationEvent
from toolops.notify import outbox
from toolops.notify.models import Webhook

pytestmark = pytest.mark.django_db


def test_the_demo_receiver_becomes_the_groups_webhook_and_prints_what_it_receives(
    django_capture_on_commit_callbacks: Any,
) -> None:
    lines: list[str] = []
    earlier = demo_hook.receiver_start(lines.append)
    earlier.stop()
    receiver = demo_hook.receiver_start(lines.append)
    try:
        # The earlier demo's webhooks (their port is gone) are replaced, not kept.
        hooks = list(Webhook.objects.order_by("group"))
        assert [(h.group, h.shown) for h in hooks] == [
            ("operators", receiver.url_for("operators")),
            ("reviewers", receiver.url_for("reviewers")),
        ]
        assert AuditEntry.objects.filter(action="webhook.remove").count() == 2
        event = NotificationEvent.objects.create(
            key="approval_waiting:ap-1",
            kind="approval_waiting",
            ref="ap-1",
            fanned_out_at=timezone.now(),
            subject="Approval waiting: Charge 89.00 EUR",
            link="http://127.0.0.1:8000/console/approvals/ap-1/",
        )
        target = next(h.target for h in hooks if h.group == "reviewers")
        NotificationDelivery.objects.create(event=event, channel="webhook", target=target)

        with django_capture_on_commit_callbacks():
            assert outbox.deliveries_send(channel="webhook", target=target) == 1

        assert lines[-1] == (
            "↪ webhook reviewers ✓ signed: Approval waiting: Charge 89.00 EUR "
            "http://127.0.0.1:8000/console/approvals/ap-1/"
        )
        forged = httpx.post(receiver.url_for("operators"), content=b"{}", timeout=5)
        assert forged.status_code == 401
        assert lines[-1] == "↪ webhook operators ✗ the signature does not check out: refused (401)"
        banner = "\n".join(demo_hook.banner_lines("http://127.0.0.1:8000", "as files", receiver))
        assert f"http://127.0.0.1:{receiver.port}/hooks/" in banner
        assert "reviewers and operators groups' webhook" in banner
    finally:
        demo_hook.receiver_stop(receiver)
    with pytest.raises(httpx.ConnectError):
        httpx.post(receiver.url_for("reviewers"), content=b"{}", timeout=5)
