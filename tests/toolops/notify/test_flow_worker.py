"""Notifications end to end, with a real ToolOps server, a real Celery worker, a real SMTP
server and a real webhook receiver: a reviewer is told within seconds of a charge being
held, follows the link and decides; an event recorded again sends nothing; a burst is
one message; a failing webhook is retried, then shown failed on the outbox page."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.test import Client

from tests.conftest import Shop
from tests.console.conftest import logged_in, make_user
from tests.worker import Worker, wait_for
from toolops.models import (
    Agent,
    Approval,
    NotificationDelivery,
    NotificationEvent,
    NotificationPreference,
    ToolCall,
)
from toolops.notify import events
from toolops.templatetags.when import day_words

from .receivers import SmtpServer, WebhookReceiver

CHARGE = {"order_id": "ord-9", "amount": "199.00", "currency": "EUR", "customer": "cus_42"}
TITLE = "Charge 199.00 EUR to customer cus_42 for order ord-9"
PUBLIC = "http://console.test"


def stack_env(smtp: SmtpServer, hook: WebhookReceiver, **extra: str) -> dict[str, str]:
    return {
        **smtp.env(),
        **hook.env(),
        "TOOLOPS_PUBLIC_URL": PUBLIC,
        "TOOLOPS_LOG_LEVEL": "INFO",
        # Approved calls whose (test-process) message went elsewhere start at once.
        "TOOLOPS_APPROVAL_SWEEP_S": "1",
        "TOOLOPS_APPROVAL_GRACE_S": "1",
        "TOOLOPS_NOTIFY_WINDOW_S": "1",
        **extra,
    }


def hold(http: httpx.Client, run_id: str, step: int = 0, **args: str) -> dict[str, Any]:
    if step == 0:
        assert http.post("/api/v1/runs", json={"run_id": run_id}).status_code == 201
    call = {"step_index": step, "tool": "charge", "args": {**CHARGE, **args}}
    response = http.post(f"/api/v1/runs/{run_id}/calls", json=call)
    assert response.status_code == 202, response.text
    return response.json()


def flow_log(worker: Worker) -> list[str]:
    return [line for line in worker.output().splitlines() if "notify:" in line]


@pytest.fixture
def agent_http(
    worker: Callable[..., Worker], toolops_server: Callable[..., Any], agent_a: tuple[Agent, str]
) -> Callable[..., tuple[Worker, httpx.Client]]:
    def start(**env: str) -> tuple[Worker, httpx.Client]:
        w = worker(**env)
        server = toolops_server(TOOLOPS_DATA_DIR=str(w.data_dir))
        auth = {"Authorization": f"Bearer {agent_a[1]}"}
        return w, httpx.Client(base_url=server.url, headers=auth, timeout=40)

    return start


def test_a_reviewer_is_told_follows_the_link_and_decides(
    agent_http: Callable[..., tuple[Worker, httpx.Client]],
    shop: Shop,
    smtp: SmtpServer,
    hook: WebhookReceiver,
    django_user_model: Any,
) -> None:
    rita = make_user(django_user_model, "rita", "reviewers", email="rita@example.com")
    raj = make_user(django_user_model, "raj", "reviewers", email="raj@example.com")
    NotificationPreference.objects.create(user=raj, kind="approval_waiting", email=False)
    make_user(django_user_model, "sam", "support", email="sam@example.com")
    w, http = agent_http(**stack_env(smtp, hook))

    held_at = time.monotonic()
    call = hold(http, "r-1")
    wait_for(lambda: smtp.to("rita@example.com") and hook.hooks, 30, w)

    [mail] = smtp.to("rita@example.com")
    text = mail.get_content()
    approval = Approval.objects.get()
    link = f"{PUBLIC}/console/approvals/{approval.approval_id}/"
    assert mail["Subject"] == f"[ToolOps] Approval waiting: {TITLE}"
    assert link in text and "agent-a" in text
    # An absolute deadline, true whenever the message is read; never "2 minutes left".
    by = day_words(approval.expires_at)
    assert f"waits for a decision until {by}" in text and f"Decide by: {by}" in text
    assert "left" not in text.replace("left with", "")
    assert "Only refund can undo charge: ToolOps runs it if the run is abandoned." in text
    assert "Customer: cus_42" in text and "Currency: EUR" in text
    [webhook] = hook.hooks
    assert webhook.signed
    assert link in webhook.body["text"] and TITLE in webhook.body["text"]
    assert webhook.body["events"][0]["kind"] == "approval_waiting"
    assert {"title": "Customer", "value": "cus_42", "short": True} in (
        webhook.body["attachments"][0]["fields"]
    )
    # Raj turned approvals off; support is not told of approvals.
    assert smtp.to("raj@example.com") == [] and smtp.to("sam@example.com") == []

    # The same event again is no event: nothing recorded, nothing sent.
    assert events.approval_waiting(approval_id=approval.approval_id) is False
    assert NotificationEvent.objects.count() == 1

    # Rita follows the link, logged in, and approves. Her e-mail's link is signed for
    # her: the page says where she came from, the outbox when she did.
    followed = re.search(rf"Open it: ({re.escape(link)}\?via=\S+)", text)
    assert followed, text
    reviewer = Client()
    reviewer.force_login(rita)
    page = reviewer.get(followed[1].removeprefix(PUBLIC))
    assert page.status_code == 200 and b"Approve" in page.content
    said = re.findall(rb'<li class="msg-[^<]*', page.content)
    assert b"You followed the link ToolOps e-mailed you at " in b"".join(said), said
    mailed = NotificationDelivery.objects.get(channel="email", target="rita@example.com")
    assert mailed.opened_at is not None
    decided = reviewer.post(
        f"/console/approvals/{approval.approval_id}/decide/",
        {"decision": "approve", "note": "", "args_hash": approval.args_hash, "confirmed": "1"},
    )
    assert decided.status_code == 302
    decided_at = time.monotonic()
    done = lambda: ToolCall.objects.get(call_id=call["call_id"]).status == "succeeded"  # noqa: E731
    wait_for(done, 30, w)
    charged_at = time.monotonic()

    assert len(shop.requests("/payments/charges")) == 1
    assert len(smtp.messages) == 1 and len(hook.hooks) == 1
    assert set(NotificationDelivery.objects.values_list("status", flat=True)) == {"sent"}
    mail_at, hook_at = float(mail["X-Received-At"]), hook.hooks[0].at
    print(f"\n+0.00 s  charge held (approval {approval.approval_id})")
    print(f"+{mail_at - held_at:.2f} s  e-mail received by rita@example.com: {mail['Subject']}")
    print(f"+{hook_at - held_at:.2f} s  webhook received, signature checked: {webhook.signed}")
    print(f"+{decided_at - held_at:.2f} s  rita followed the link and approved")
    print(f"+{charged_at - held_at:.2f} s  the charge succeeded, sent to the shop once")
    print("worker log:\n" + "\n".join(flow_log(w)))
    print("the e-mail:\n" + text)


def test_a_burst_is_one_message_and_a_failing_webhook_is_shown_failed(
    worker: Callable[..., Worker],
    toolops_server: Callable[..., Any],
    agent_a: tuple[Agent, str],
    tmp_path: Path,
    smtp: SmtpServer,
    hook: WebhookReceiver,
    django_user_model: Any,
) -> None:
    make_user(django_user_model, "rita", "reviewers", email="rita@example.com")
    hook.fail_with = 500
    # The server shares the broker the worker will read: the three holds are queued
    # before the worker starts, so all three fall in one window however slow the machine.
    server = toolops_server(TOOLOPS_DATA_DIR=str(tmp_path / "var"))
    auth = {"Authorization": f"Bearer {agent_a[1]}"}
    with httpx.Client(base_url=server.url, headers=auth, timeout=40) as http:
        for n in range(3):
            hold(http, "r-1", step=n, order_id=f"ord-{n}")
    env = stack_env(
        smtp,
        hook,
        TOOLOPS_NOTIFY_WINDOW_S="5",
        TOOLOPS_NOTIFY_MAX_ATTEMPTS="3",
        TOOLOPS_NOTIFY_RETRY_BASE_S="0.5",
    )
    w = worker(**env)
    assert w.data_dir == tmp_path / "var"

    failed = NotificationDelivery.objects.filter(channel="webhook", status="failed")
    wait_for(lambda: smtp.messages and failed.count() == 3, 60, w)

    [mail] = smtp.messages
    text = mail.get_content()
    # The subject counts what the message holds and names the first.
    assert re.fullmatch(
        r"\[ToolOps\] 3 approvals wait: Charge 199\.00 EUR .* for order ord-\d and 2 more",
        mail["Subject"],
    )
    for n in range(3):
        assert f"for order ord-{n}" in text
    assert len(re.findall(r"/console/approvals/ap-", text)) == 3
    # One message each try: 3 tries, each with the 3 events.
    assert hook.tries == 3
    assert set(failed.values_list("attempts", flat=True)) == {3}

    olga = logged_in(make_user(django_user_model, "olga", "operators"))
    page = olga.get("/console/notifications/?status=failed").content.decode()
    assert "The webhook at 127.0.0.1 answered 500 Internal Server Error." in page
    assert "reviewers group's webhook" in page and "Failed" in page
    print("worker log:\n" + "\n".join(flow_log(w)))
