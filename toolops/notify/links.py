"""The link in a person's e-mail, signed: `…/console/approvals/<id>/?via=<signature>`.

The signature (Django's signing, under SECRET_KEY and a salt of its own) names the
delivery it was sent in, so the page it opens can tell the link came from ToolOps and
whom it was sent to, and the outbox can show when each person opened theirs. It is not a
credential: the console still asks the person to log in, and a link forwarded to someone
else opens nothing more than their own login would. A link older than its event's use
(LINK_MAX_AGE_S), changed on the way, or moved onto another page (the signature names the
delivery, not the page: the page checks that the delivery's event links to it) is said
so, records nothing, and the page shows as it is now."""

from __future__ import annotations

from datetime import UTC, timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.core import signing
from django.utils import timezone

from toolops.notify.models import NotificationDelivery

SALT = "toolops.notify.link"
LINK_MAX_AGE_S = 14 * 24 * 3600
PARAM = "via"


def signed(link: str, delivery_pk: int) -> str:
    token = signing.dumps(delivery_pk, salt=SALT, compress=False)
    return f"{link}{'&' if '?' in link else '?'}{PARAM}={token}"


def opened(token: str, user: object, *, page: str, max_age_s: float = LINK_MAX_AGE_S) -> str:
    """What the page at `page` (its path, request.path_info) says of a followed link, and
    the delivery's first opening recorded when it was sent to `user` for this page: ""
    for no link. A signed token moved onto another page's URL is a link ToolOps never
    sent: said so, and nothing recorded."""
    if not token:
        return ""
    try:
        delivery_pk = signing.loads(token, salt=SALT, max_age=timedelta(seconds=max_age_s))
    except signing.SignatureExpired:
        return "This link is older than two weeks: here is the page as it is now."
    except signing.BadSignature:
        return (
            "This link is not one ToolOps sent (or it was changed): here is the page as it is now."
        )
    if not isinstance(delivery_pk, int):
        return ""
    delivery = NotificationDelivery.objects.select_related("event").filter(pk=delivery_pk).first()
    if delivery is None:
        return ""  # its event was purged: nothing to say
    if not _same_page(delivery.event.link, page):
        return "This link was sent for another page: here is this page as it is now."
    if delivery.user_id != getattr(user, "pk", None):
        return "This link was sent to someone else; you see the page as yourself."
    NotificationDelivery.objects.filter(pk=delivery.pk, opened_at__isnull=True).update(
        opened_at=timezone.now()
    )
    sent = (delivery.sent_at or delivery.created_at).astimezone(UTC)
    return f"You followed the link ToolOps e-mailed you at {sent:%H:%M} UTC."


def _same_page(link: str, page: str) -> bool:
    """Whether the event's link (TOOLOPS_PUBLIC_URL + its path) names the page at `page`.
    Paths are compared, so a deployment reached by another host name still matches; the
    public URL's own path (a deployment under a prefix) is part of both."""
    expected = urlsplit(settings.TOOLOPS_PUBLIC_URL.rstrip("/") + page).path
    return bool(link) and urlsplit(link).path == expected
