"""Abusing notifications: an agent puts a line break and a header in an arg that fills a
reviewer's e-mail, so that the batch the e-mail carries fails (other agents' approvals
never arrive) or a fake `Bcc:` line shows in its body; puts chat markup in an arg, so that
the reviewers' channel is pinged with a link dressed as ToolOps'; or a reviewer's signed
link is moved onto another approval, to pass that page off as the one ToolOps e-mailed.

The mail goes to a real SMTP server (aiosmtpd) and the chat message to a real HTTP
receiver that checks the signature, as in tests/toolops/notify/."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.core import mail
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.console.conftest import logged_in, make_user
from tests.toolops.api.helpers import create_run, post_call
from tests.toolops.notify.receivers import SmtpServer, WebhookReceiver
from toolops.models import Approval, NotificationDelivery, NotificationEvent
from toolops.notify import links, outbox

pytestmark = pytest.mark.django_db

RITA = "rita@example.com"
BCC = "dave\r\nBcc: x@evil.example"
PING = "<!channel> <http://evil|Approve now>"
MATTERMOST = "@here [Approve now](http://evil) ![x](http://evil/pixel.png)"


@pytest.fixture
def rita(django_user_model: Any) -> Any:
    return make_user(django_user_model, "rita", "reviewers", email=RITA)


@pytest.fixture
def smtp(settings: Any) -> Iterator[SmtpServer]:
    server = SmtpServer()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", server.port
    yield server
    server.stop()


@pytest.fixture
def chat(settings: Any) -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver()
    settings.TOOLOPS_WEBHOOKS = {"reviewers": (receiver.url, receiver.secret)}
    yield receiver
    receiver.stop()


def hold_charges(api: APIClient, capture: Any, *customers: str) -> list[Approval]:
    """One held charge per customer, in one run, each told to its recipients (fanned out;
    the worker's wake-ups are not sent: the tests send)."""
    create_run(api)
    for step, customer in enumerate(customers):
        args = {
            "order_id": f"ord-{step}",
            "amount": "89.00",
            "currency": "EUR",
            "customer": customer,
        }
        with capture():
            assert post_call(api, step_index=step, tool="charge", args=args).status_code == 202
    for event in NotificationEvent.objects.order_by("pk"):
        with capture():
            outbox.event_fan_out(event_pk=event.pk)
    return list(Approval.objects.order_by("created_at", "pk"))


@pytest.mark.parametrize("position", [0, 1], ids=["first", "middle"])
def test_a_line_break_in_an_arg_neither_breaks_the_batch_nor_adds_a_header_or_a_line(
    api: APIClient,
    shop: Shop,
    rita: Any,
    smtp: SmtpServer,
    django_capture_on_commit_callbacks: Any,
    position: int,
) -> None:
    customers = ["cus_1", "cus_2", "cus_3"]
    customers[position] = BCC
    hold_charges(api, django_capture_on_commit_callbacks, *customers)

    sent = outbox.deliveries_send(channel="email", target=RITA)

    assert sent == 3
    assert set(NotificationDelivery.objects.values_list("status", flat=True)) == {"sent"}
    [message] = smtp.messages
    assert message["X-Envelope-To"] == RITA and message["Bcc"] is None
    body = message.get_content()
    for n in range(3):
        assert f"for order ord-{n}" in body
    assert not any(line.lstrip().startswith("Bcc:") for line in body.splitlines())
    # The value is still shown, on its own line: within it, never as a line of its own.
    assert "\nCustomer: dave Bcc: " in body
    assert "\r" not in message["Subject"] and "\n" not in message["Subject"]


def test_chat_markup_in_args_reaches_the_webhook_inert(
    api: APIClient, shop: Shop, chat: WebhookReceiver, django_capture_on_commit_callbacks: Any
) -> None:
    [approval] = hold_charges(api, django_capture_on_commit_callbacks, f"{PING} {MATTERMOST}")

    assert outbox.deliveries_send(channel="webhook", target="reviewers") == 1

    [hook] = chat.hooks
    assert hook.signed
    [attachment] = hook.body["attachments"]
    fields = attachment["fields"]
    shown = [hook.body["text"], attachment["title"], attachment["fallback"], attachment["text"]]
    shown += [f["title"] for f in fields] + [f["value"] for f in fields]
    customer = next(f["value"] for f in fields if f["title"] == "Customer")
    # Slack: the control sequences show as typed; nothing in angle brackets is left.
    assert customer.startswith("&lt;!channel&gt; &lt;http://evil|Approve now&gt;")
    assert "&lt;!channel&gt;" in hook.body["text"] and "&lt;!channel&gt;" in attachment["title"]
    assert not any("<" in value or ">" in value for value in shown)
    # Mattermost: no mention word, and no link or image forms.
    assert not any(re.search(r"@(here|channel|all)\b", value) for value in shown)
    assert not any("](" in value for value in shown)
    assert "@\u2060here [Approve now]\u2060(http://evil)" in customer
    # Our own link is the one link dressed as ToolOps', and it is intact.
    link = f"http://localhost:8000/console/approvals/{approval.approval_id}/"
    assert attachment["title_link"] == link and hook.body["text"].endswith(f" {link}")
    # The plain data stays raw: a receiver that renders it escapes it for its format.
    assert hook.body["events"][0]["fields"]["Customer"].startswith(PING)


def test_a_signed_link_moved_onto_another_approval_says_so_and_records_nothing(
    api: APIClient, shop: Shop, rita: Any, django_capture_on_commit_callbacks: Any
) -> None:
    first, second = hold_charges(api, django_capture_on_commit_callbacks, "cus_1", "cus_2")
    outbox.deliveries_send(channel="email", target=RITA)
    [message] = mail.outbox
    sent = dict(re.findall(r"Open it: \S+/console/approvals/([^/]+)/\?via=(\S+)", message.body))
    reviewer = logged_in(rita)

    moved = reviewer.get(f"/console/approvals/{second.approval_id}/?via={sent[first.approval_id]}")

    assert moved.status_code == 200
    assert b"This link was sent for another page: here is this page as it is now." in moved.content
    assert b"You followed the link ToolOps e-mailed you" not in moved.content
    assert not NotificationDelivery.objects.filter(opened_at__isnull=False).exists()

    # The link on its own page still says where it came from.
    own = reviewer.get(
        f"/console/approvals/{first.approval_id}/?{links.PARAM}={sent[first.approval_id]}"
    )
    assert b"You followed the link ToolOps e-mailed you" in own.content
    opened = NotificationDelivery.objects.filter(opened_at__isnull=False)
    assert list(opened.values_list("event__ref", flat=True)) == [first.approval_id]
