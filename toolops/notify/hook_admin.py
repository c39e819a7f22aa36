"""An operator's webhooks (the console's /console/notifications/webhooks/): add one, send
it a test, remove it. Each is audited with the webhook's group and its URL as shown
(`hooks.shown_url`), never its secret.

A test is a real message, signed and POSTed through the channel's own sender
(toolops/notify/webhook.py `post`), outside any transaction: the audit entry that says
how it went is written after the receiver answered (or did not)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from toolops.audit.services import Action, Ref, audit_record
from toolops.notify import hooks, webhook
from toolops.notify.email import SendFailed
from toolops.notify.models import NotificationDelivery, NotificationEvent, Webhook
from traces.vault import VaultError

if TYPE_CHECKING:
    from django.http import HttpRequest

WEBHOOKS_PATH = "/console/notifications/webhooks/"
TEST_KIND = "webhook_test"


@dataclass(frozen=True)
class Added:
    hook: Webhook
    secret: str
    made: bool  # the secret was made by ToolOps (and is shown this once)


@dataclass(frozen=True)
class Tested:
    ok: bool
    said: str  # "The receiver answered 200 in 34 ms." or why it did not take it


def _ref(target: str) -> Ref:
    return Ref("webhook", target, WEBHOOKS_PATH)


def _name(by: Any) -> str:
    return by.get_username() if getattr(by, "pk", None) else "ToolOps"


def _already(group: str, url: str) -> str:
    """Why `url` cannot be added to `group` again, or ""."""
    env = settings.TOOLOPS_WEBHOOKS.get(group)
    if env is not None and env[0] == url:
        return f"This URL is already the {group} group's webhook ({hooks.env_setting(group)})."
    for hook in Webhook.objects.filter(group=group):
        try:
            same = hooks.opened(hook)[0] == url
        except VaultError:
            continue
        if same:
            return f"This URL is already the {group} group's webhook #{hook.pk}."
    return ""


def webhook_add(
    *,
    group: str,
    url: str,
    secret: str | None,
    label: str = "",
    by: Any,
    request: HttpRequest | None = None,
) -> Added:
    """Add a webhook for `group`'s kinds. `secret` None: ToolOps makes one. Bad input →
    BadWebhook naming the field, and nothing is written."""
    group = hooks.check_group(group)
    url = hooks.check_url(url)
    made = secret is None
    secret = hooks.new_secret() if secret is None else hooks.check_secret(secret)
    label = hooks.check_label(label)
    taken = _already(group, url)
    if taken:
        raise hooks.BadWebhook("url", taken)
    shown = hooks.shown_url(url)
    with transaction.atomic():
        hook = Webhook.objects.create(
            group=group,
            label=label,
            shown=shown,
            sealed=hooks.sealed(url=url, secret=secret),
            created_by=by if getattr(by, "pk", None) else None,
        )
        audit_record(
            actor=by,
            action=Action.WEBHOOK_ADD,
            obj=_ref(hook.target),
            request=request,
            detail={
                "group": group,
                "url": shown,
                "label": label,
                "signing_key": "made by ToolOps" if made else "typed by the operator",
            },
            summary=f"Added webhook {hook.target} for the {group} group: {shown}",
        )
    return Added(hook, secret, made)


def webhook_remove(*, hook: Webhook, by: Any, request: HttpRequest | None = None) -> int:
    """Remove a console webhook. Its messages still waiting are failed at once, saying so
    (they would only fail later, one retry after another). Returns how many."""
    target, by_name = hook.target, _name(by)
    with transaction.atomic():
        waiting = NotificationDelivery.objects.filter(
            channel=NotificationDelivery.Channel.WEBHOOK,
            target=target,
            status=NotificationDelivery.Status.PENDING,
        ).update(
            status=NotificationDelivery.Status.FAILED,
            last_error=f"Not sent: the webhook was removed in the console by {by_name}.",
            lease_until=None,
        )
        audit_record(
            actor=by,
            action=Action.WEBHOOK_REMOVE,
            obj=_ref(target),
            request=request,
            detail={
                "group": hook.group,
                "url": hook.shown,
                "label": hook.label,
                "waiting_failed": waiting,
            },
            summary=f"Removed webhook {target} of the {hook.group} group: {hook.shown}",
        )
        hook.delete()
    return waiting


def _test_event(listed: hooks.Listed, by_name: str, message_id: str) -> NotificationEvent:
    """The test message's one event, as the receiver will read any other (not stored)."""
    public = settings.TOOLOPS_PUBLIC_URL.rstrip("/")
    return NotificationEvent(
        key=f"{TEST_KIND}:{message_id}",
        kind=TEST_KIND,
        ref=listed.target,
        subject=f"Test message from ToolOps to the {listed.group} group's webhook",
        text=f"{by_name} sent this from the console: when it shows here, the webhook works.",
        fields=[["Group", listed.group], ["Sent by", by_name]],
        link=public + WEBHOOKS_PATH,
        created_at=timezone.now(),
    )


def webhook_test(*, listed: hooks.Listed, by: Any, request: HttpRequest | None = None) -> Tested:
    """Send `listed` a real, signed test message and say how the receiver answered."""
    message_id = secrets.token_hex(8)
    event = _test_event(listed, _name(by), message_id)
    try:
        url, secret = hooks.resolve(listed.target)
        raw = webhook.json_body([event])
        answer = webhook.post(url=url, secret=secret, raw=raw, message_id=message_id)
    except SendFailed as failure:
        tested = Tested(False, str(failure))
    else:
        tested = Tested(True, f"The receiver answered {answer.status} in {answer.ms:.0f} ms.")
    with transaction.atomic():
        audit_record(
            actor=by,
            action=Action.WEBHOOK_TEST,
            obj=_ref(listed.target),
            request=request,
            detail={
                "group": listed.group,
                "url": listed.shown,
                "ok": tested.ok,
                "answer": tested.said,
                "delivery": message_id,
            },
            summary=f"Sent a test to webhook {listed.target} ({listed.shown}): {tested.said}",
        )
    return tested
