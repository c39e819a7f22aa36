"""Where each group's chat messages go: the environment's webhook (TOOLOPS_WEBHOOK_<GROUP>_URL
and _SECRET, shown read-only in the console) and those operators add in the console
(`Webhook` rows). Both receive their group's kinds.

A delivery's `target` names one of them: "operators" is the environment's, "operators#7"
the console's webhook number 7. `resolve` turns a target into the URL and secret at send
time, so a webhook removed since its deliveries were queued fails their send (retried,
then failed with a sentence) rather than reaching anyone else.

A console webhook's URL and secret are sealed together with the keys that seal full args
(traces/vault.py: MultiFernet under TOOLOPS_ARGS_KEYS), not stored as they are: the
secret signs every message, and a chat tool's incoming-webhook URL is a credential of its
own (anyone holding it can post to the channel). What pages and the audit log show is
`shown_url`, the URL with its long segments and query cut."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from toolops.notify.clean import one_line
from toolops.notify.email import SendFailed
from toolops.notify.models import Webhook
from traces.vault import VaultError, seal, unseal

URL_MAX = 2000
SECRET_MAX = 200
LABEL_MAX = 80
# A path segment this long is taken for a token (Slack's and Mattermost's hook keys are).
TOKEN_SEGMENT = 16


class BadWebhook(Exception):
    """A webhook refused; `field` is the form field at fault, str() says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


# -- checks ---------------------------------------------------------------------------------


def check_group(group: str) -> str:
    groups = settings.TOOLOPS_WEBHOOK_GROUPS
    if group not in groups:
        said = ", ".join(groups[:-1]) + f" or {groups[-1]}"
        raise BadWebhook("group", f"“{group[:40]}” is not a group: choose {said}.")
    return group


def check_url(raw: str) -> str:
    """The URL as it will be POSTed to: http(s), a host, no user name or password."""
    url = raw.strip()
    if not url:
        raise BadWebhook("url", "Give the URL the messages are to be POSTed to.")
    if len(url) > URL_MAX:
        raise BadWebhook("url", f"The URL is {len(url)} characters long: at most {URL_MAX}.")
    if any(char.isspace() or not char.isprintable() for char in url):
        raise BadWebhook("url", "The URL has a space or a control character in it.")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        raise BadWebhook("url", "That is not a URL ToolOps can send to.") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise BadWebhook(
            "url",
            "The URL must start with http:// or https:// "
            f"(this one starts with “{(parts.scheme or url)[:20]}”).",
        )
    if "@" in parts.netloc:
        raise BadWebhook(
            "url",
            "The URL carries a user name or password (“user:password@”): it would be sent "
            "and shown with them. Receivers check the signature made with the secret instead.",
        )
    if not parts.hostname:
        raise BadWebhook("url", "The URL has no host name.")
    return url


def check_secret(secret: str) -> str:
    least = settings.TOOLOPS_WEBHOOK_SECRET_MIN
    if not secret:
        raise BadWebhook("secret", "Type the secret, or let ToolOps make one.")
    if any(char.isspace() or not char.isprintable() for char in secret):
        raise BadWebhook("secret", "The secret has a space or a control character in it.")
    if len(secret) < least:
        raise BadWebhook(
            "secret",
            f"The secret is {len(secret)} characters long: it needs {least} or more, so "
            "that nobody can guess it and sign messages as ToolOps.",
        )
    if len(secret) > SECRET_MAX:
        raise BadWebhook("secret", f"The secret is longer than {SECRET_MAX} characters.")
    return secret


def check_label(label: str) -> str:
    said = one_line(label, limit=10_000).strip()
    if len(said) > LABEL_MAX:
        raise BadWebhook("label", f"The name is {len(said)} characters long: at most {LABEL_MAX}.")
    return said


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def shown_url(url: str) -> str:
    """The URL with what may be a credential cut: each path segment of 16 characters or
    more ("…" and its last 4), and any query. "https://hooks.slack.com/services/T0/B0/…k3Zq"."""
    parts = urlsplit(url)
    segments = [
        f"…{segment[-4:]}" if len(segment) >= TOKEN_SEGMENT else segment
        for segment in parts.path.split("/")
    ]
    query = "?…" if parts.query else ""
    return f"{parts.scheme}://{parts.netloc}{'/'.join(segments)}{query}"[:200]


# -- the store -------------------------------------------------------------------------------


def sealed(*, url: str, secret: str) -> str:
    return seal({"url": url, "secret": secret})


def opened(hook: Webhook) -> tuple[str, str]:
    """The console webhook's URL and secret; VaultError when no key opens them."""
    value = unseal(hook.sealed)
    return value["url"], value["secret"]


def env_setting(group: str) -> str:
    return f"TOOLOPS_WEBHOOK_{group.upper()}_URL"


@dataclass(frozen=True)
class Listed:
    """A webhook as the console lists it."""

    group: str
    shown: str
    hook: Webhook | None = None  # None: the environment's (read-only here)

    @property
    def setting(self) -> str:
        return "" if self.hook is not None else env_setting(self.group)

    @property
    def target(self) -> str:
        return self.hook.target if self.hook is not None else self.group


def webhooks_listed() -> list[Listed]:
    """Every webhook, by group (in TOOLOPS_WEBHOOK_GROUPS' order), the environment's first,
    then the console's oldest first. One query."""
    by_group: dict[str, list[Listed]] = {group: [] for group in settings.TOOLOPS_WEBHOOK_GROUPS}
    for group, (url, _) in settings.TOOLOPS_WEBHOOKS.items():
        by_group.setdefault(group, []).append(Listed(group, shown_url(url)))
    for hook in Webhook.objects.select_related("created_by").order_by("created_at", "pk"):
        by_group.setdefault(hook.group, []).append(Listed(hook.group, hook.shown, hook))
    return [listed for group in by_group.values() for listed in group]


def targets_for(group: str) -> list[str]:
    """The webhook targets of `group`: the environment's (when set), then the console's."""
    found = [group] if group in settings.TOOLOPS_WEBHOOKS else []
    pks = (
        Webhook.objects.filter(group=group)
        .order_by("created_at", "pk")
        .values_list("pk", flat=True)
    )
    return found + [f"{group}#{pk}" for pk in pks]


def resolve(target: str) -> tuple[str, str]:
    """The URL and secret a target's messages are signed and sent with, now."""
    group, _, number = target.partition("#")
    if not number:
        if group not in settings.TOOLOPS_WEBHOOKS:  # taken out of the settings since queued
            raise SendFailed(
                f"No webhook is set for the group {group} "
                f"({env_setting(group)}); set it, then send again."
            )
        return settings.TOOLOPS_WEBHOOKS[group]
    hook = Webhook.objects.filter(pk=int(number) if number.isdigit() else 0, group=group).first()
    if hook is None:
        raise SendFailed(
            f"The {group} group's webhook #{number} was removed in the console; add it "
            "again, then send again."
        )
    try:
        return opened(hook)
    except VaultError:
        raise SendFailed(
            f"The {group} group's webhook #{number} cannot be opened: no key in "
            "TOOLOPS_ARGS_KEYS decrypts its URL and secret. Remove it and add it again."
        ) from None
