"""Webhooks in the console (/console/notifications/webhooks/, operators only): the
environment's listed read-only, one added with a made secret shown once, a real signed
test against a real local receiver, removal, each audited; bad input refused naming the
problem with nothing written; and the outbox sending to console webhooks as well as the
environment's."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from tests.conftest import free_port
from tests.console.conftest import logged_in, make_user
from toolops.models import AuditEntry, CircuitBreaker, NotificationDelivery, NotificationEvent
from toolops.notify import events, hook_admin, outbox
from toolops.notify.models import Webhook

from .receivers import WebhookReceiver

pytestmark = pytest.mark.django_db
PAGE = "/console/notifications/webhooks/"


@pytest.fixture
def olga(django_user_model: Any) -> Any:
    return make_user(django_user_model, "olga", "operators")


@pytest.fixture
def ops(olga: Any) -> Client:
    return logged_in(olga)


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    hook = WebhookReceiver(secret="")  # its secret: the one the console makes
    yield hook
    hook.stop()


def add(client: Client, **fields: str) -> Any:
    data = {"group": "operators", "url": "", "secret_choice": "make", "secret": "", "label": ""}
    return client.post(f"{PAGE}add/", {**data, **fields})


def audited() -> list[tuple[str, str, str]]:
    rows = AuditEntry.objects.order_by("id").values_list("actor_username", "action", "object_id")
    return list(rows)


def test_an_operator_adds_a_webhook_its_made_secret_shown_once_and_tests_it(
    ops: Client, receiver: WebhookReceiver
) -> None:
    answer = add(ops, url=receiver.url, label="#ops-alerts")

    assert answer.status_code == 200
    page = answer.content.decode()
    shown = re.search(r'<code class="secret" id="webhook-secret">([^<]+)</code>', page)
    assert shown, page
    secret = shown[1]
    hook = Webhook.objects.get()
    assert (hook.group, hook.label, hook.shown) == ("operators", "#ops-alerts", receiver.url)
    # Encrypted at rest, URL and secret alike; never shown again, never in the audit log.
    assert secret not in hook.sealed and receiver.url not in hook.sealed
    assert secret not in ops.get(PAGE).content.decode()
    assert "no-store" in answer["Cache-Control"]

    receiver.secret = secret
    tested = ops.post(f"{PAGE}test/", {"target": hook.target}, follow=True)

    said = tested.content.decode()
    assert re.search(
        r"Test sent to the operators group&#x27;s webhook .*: The receiver "
        r"answered 200 in \d+ ms\.",
        said,
    ), said
    (message,) = receiver.hooks
    assert message.signed
    assert message.body["events"][0]["kind"] == "webhook_test"
    assert "olga sent this from the console" in message.body["events"][0]["text"]
    target = f"operators#{hook.pk}"
    assert audited() == [
        ("olga", "webhook.add", target),
        ("olga", "webhook.test", target),
    ]
    everything = json.dumps(list(AuditEntry.objects.values("summary", "detail")))
    assert secret not in everything
    assert AuditEntry.objects.get(action="webhook.test").detail["ok"] is True


def test_a_test_says_plainly_when_the_receiver_refuses_or_cannot_be_reached(
    ops: Client, receiver: WebhookReceiver
) -> None:
    receiver.secret = "the-receivers-own-secret-0123"
    add(ops, url=receiver.url, secret_choice="mine", secret="not-the-receivers-secret-42")
    hook = Webhook.objects.get()

    refused = ops.post(f"{PAGE}test/", {"target": hook.target}, follow=True).content.decode()

    assert "did not arrive: The webhook at 127.0.0.1 answered 401 Unauthorized." in refused
    assert AuditEntry.objects.get(action="webhook.test").detail["ok"] is False

    nobody = f"http://127.0.0.1:{free_port()}/hooks"
    add(ops, url=nobody, group="support")
    gone = Webhook.objects.get(group="support")
    said = ops.post(f"{PAGE}test/", {"target": gone.target}, follow=True).content.decode()
    assert "did not arrive: Could not connect to the webhook at 127.0.0.1." in said


def test_the_environments_webhook_is_listed_read_only_and_can_be_tested(
    ops: Client, settings: Any
) -> None:
    env = WebhookReceiver()
    try:
        settings.TOOLOPS_WEBHOOKS = {"reviewers": (env.url, env.secret)}
        page = ops.get(PAGE).content.decode()
        assert "set by <code>TOOLOPS_WEBHOOK_REVIEWERS_URL</code>" in page
        assert "/remove/" not in page  # nothing to remove: it is the environment's

        said = ops.post(f"{PAGE}test/", {"target": "reviewers"}, follow=True).content.decode()

        assert "The receiver answered 200" in said
        assert [h.signed for h in env.hooks] == [True]
        assert audited() == [("olga", "webhook.test", "reviewers")]
    finally:
        env.stop()


def test_removing_a_webhook_fails_what_waited_for_it_and_is_audited(
    ops: Client, receiver: WebhookReceiver
) -> None:
    add(ops, url=receiver.url)
    hook = Webhook.objects.get()
    event = NotificationEvent.objects.create(
        key="breaker_opened:x:1", kind="breaker_opened", ref="x", fanned_out_at=timezone.now()
    )
    NotificationDelivery.objects.create(event=event, channel="webhook", target=hook.target)

    answer = ops.post(f"{PAGE}{hook.pk}/remove/", follow=True)

    assert "Removed the webhook" in answer.content.decode()
    assert not Webhook.objects.exists()
    assert list(NotificationDelivery.objects.values_list("status", "last_error")) == [
        ("failed", "Not sent: the webhook was removed in the console by olga.")
    ]
    assert [a for _, a, _ in audited()] == ["webhook.add", "webhook.remove"]
    assert receiver.tries == 0


BAD = [
    ({"group": "admins"}, "group", "“admins” is not a group: choose one from the list."),
    ({"url": ""}, "url", "Give the URL the messages are to be POSTed to."),
    ({"url": "ftp://hooks.example/x"}, "url", "must start with http:// or https://"),
    ({"url": "javascript:alert(1)"}, "url", "must start with http:// or https://"),
    ({"url": "https://bot:hunter2@hooks.example/x"}, "url", "carries a user name or password"),
    ({"url": "https:///x"}, "url", "The URL has no host name."),
    ({"url": "https://hooks.example/a b"}, "url", "a space or a control character"),
    ({"url": "https://hooks.example:port/x"}, "url", "not a URL ToolOps can send to"),
    (
        {"secret_choice": "mine", "secret": ""},
        "secret",
        "Type the secret, or let ToolOps make one.",
    ),
    ({"secret_choice": "mine", "secret": "short"}, "secret", "5 characters long: it needs 16"),
    ({"secret_choice": "mine", "secret": "sixteen chars with spaces"}, "secret", "a space"),
    ({"label": "x" * 81}, "label", "The name is 81 characters long: at most 80."),
]


@pytest.mark.parametrize(("fields", "field", "said"), BAD)
def test_bad_input_is_refused_naming_the_problem_and_nothing_is_written(
    ops: Client, fields: dict[str, str], field: str, said: str
) -> None:
    answer = add(ops, **{"url": "https://hooks.example/services/T0/B0/xyz", **fields})

    assert answer.status_code == 400
    page = answer.content.decode().replace("&#x27;", "'").replace("&quot;", '"')
    errors = re.findall(r'<p class="field-error">([^<]*)</p>', page)
    assert any(said in error for error in errors), errors
    # The field at fault is the one marked.
    marked = [chunk for chunk in page.split('class="field') if f'id="id_{field}"' in chunk]
    assert marked and marked[0].startswith(' has-error"'), field
    assert not Webhook.objects.exists()
    assert not AuditEntry.objects.exists()


def test_the_same_url_twice_for_a_group_is_refused(ops: Client, receiver: WebhookReceiver) -> None:
    add(ops, url=receiver.url)

    again = add(ops, url=receiver.url).content.decode()

    assert (
        f"This URL is already the operators group&#x27;s webhook #{Webhook.objects.get().pk}."
        in (again)
    )
    assert Webhook.objects.count() == 1


@pytest.mark.parametrize("who", ["reviewers", "support"])
def test_only_operators_may_see_or_change_webhooks(django_user_model: Any, who: str) -> None:
    client = logged_in(make_user(django_user_model, "pat", who))

    assert client.get(PAGE).status_code == 403
    assert add(client, url="https://hooks.example/x").status_code == 403
    assert client.post(f"{PAGE}test/", {"target": "operators"}).status_code == 403
    assert not Webhook.objects.exists()


def test_a_long_token_in_the_url_is_cut_where_it_is_shown() -> None:
    added = hook_admin.webhook_add(
        group="reviewers",
        url="https://hooks.slack.com/services/T0AAA/B0BBB/abcdefghijklmnopqrstuvwx?x=1",
        secret=None,
        by=None,
    )

    assert added.hook.shown == "https://hooks.slack.com/services/T0AAA/B0BBB/…uvwx?…"
    assert added.made and len(added.secret) >= 32


def test_the_outbox_sends_to_the_console_webhook_as_well_as_the_environments(
    settings: Any,
    receiver: WebhookReceiver,
    ops: Client,
    django_capture_on_commit_callbacks: Any,
) -> None:
    env = WebhookReceiver()
    try:
        settings.TOOLOPS_WEBHOOKS = {"operators": (env.url, env.secret)}
        added = hook_admin.webhook_add(group="operators", url=receiver.url, secret=None, by=None)
        receiver.secret = added.secret
        CircuitBreaker.objects.create(
            tool="charge", state="open", reason="5 failures in a row", opened_at=timezone.now()
        )
        events.breaker_opened(tool="charge", opened_at="t1")
        with django_capture_on_commit_callbacks():
            outbox.event_fan_out(event_pk=NotificationEvent.objects.get().pk)

        targets = sorted(NotificationDelivery.objects.values_list("target", flat=True))
        assert targets == ["operators", f"operators#{added.hook.pk}"]
        for target in targets:
            with django_capture_on_commit_callbacks():
                assert outbox.deliveries_send(channel="webhook", target=target) == 1

        for hook in (env, receiver):
            assert [h.signed for h in hook.hooks] == [True]
            assert hook.hooks[0].body["events"][0]["kind"] == "breaker_opened"
        listed = ops.get("/console/notifications/").content.decode()
        assert f"operators group's webhook #{added.hook.pk}" in listed
    finally:
        env.stop()
