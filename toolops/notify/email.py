"""The e-mail channel: one plain-text message to one person through Django's mail
settings (EMAIL_BACKEND, EMAIL_HOST, …, DEFAULT_FROM_EMAIL), listing every event folded
into it. A failure to deliver comes back as SendFailed, a sentence for the outbox page,
never a traceback.

Every value written here passes through toolops/notify/clean.py: the subject as a header
value, each line of the body as one line. An arg with a line break can neither break the
header (Django would refuse the whole message) nor start a body line of its own."""

from __future__ import annotations

import smtplib
from collections.abc import Sequence

from django.conf import settings
from django.core.mail import EmailMessage

from toolops.notify.clean import header_value, one_line
from toolops.notify.content import counted
from toolops.notify.models import NotificationEvent


class SendFailed(Exception):
    """The message did not go out; str() says why, in a sentence."""


def subject(events: Sequence[NotificationEvent]) -> str:
    return header_value(f"[ToolOps] {counted(events)}")


def body(events: Sequence[NotificationEvent], links: dict[int, str] | None = None) -> str:
    """`links`: each event's link as this person gets it (signed), by the event's pk."""
    parts = []
    for event in events:
        lines = [one_line(event.subject), "", one_line(event.text), ""]
        lines += [f"{one_line(label)}: {one_line(value)}" for label, value in event.fields]
        lines += ["", f"Open it: {one_line((links or {}).get(event.pk, event.link))}"]
        parts.append("\n".join(lines))
    footer = (
        "\n\n-- \nYou get this because of your group in ToolOps. Choose what reaches you: "
        f"{settings.TOOLOPS_PUBLIC_URL.rstrip('/')}/console/account/notifications/\n"
    )
    return "\n\n----\n\n".join(parts) + footer


def send(
    *, address: str, events: Sequence[NotificationEvent], links: dict[int, str] | None = None
) -> None:
    message = EmailMessage(subject(events), body(events, links), to=[address])
    try:
        message.send(fail_silently=False)
    except smtplib.SMTPRecipientsRefused:
        raise SendFailed(f"The mail server refused the address {address}.") from None
    except smtplib.SMTPAuthenticationError:
        raise SendFailed("The mail server refused ToolOps' login (EMAIL_HOST_USER).") from None
    except smtplib.SMTPException as exc:
        raise SendFailed(f"The mail server answered with an error: {exc}.") from None
    except TimeoutError:
        raise SendFailed(f"The mail server {settings.EMAIL_HOST} did not answer in time.") from None
    except ConnectionRefusedError:
        raise SendFailed(
            f"Could not connect to the mail server {settings.EMAIL_HOST}:{settings.EMAIL_PORT} "
            "(connection refused)."
        ) from None
    except OSError as exc:
        raise SendFailed(f"Could not reach the mail server: {exc.strerror or exc}.") from None
