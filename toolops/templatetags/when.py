"""Every time the console shows, in one format: `{% when value %}` renders
`<time datetime="ISO" title="2026-12-02 00:06:05 UTC">2026-12-02 00:06</time>`.

The server writes UTC, so a page without JavaScript is still exact; console.js rewrites
the text into the viewer's local time and leaves the UTC time in the title, on hover.
`waited` says a wait in words, the same on every page and in every view ("just now",
"2 min", "1 h 5 min"); `{{ value|waited:now }}` in a template."""

from __future__ import annotations

from datetime import UTC, datetime

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

register = template.Library()

# How short a "seconds" view may be: "12:03:05" beside the date's minutes.
FORMATS = {"minutes": "%Y-%m-%d %H:%M", "seconds": "%Y-%m-%d %H:%M:%S", "time": "%H:%M:%S"}


@register.simple_tag
def when(value: datetime | None, precision: str = "minutes", empty: str = "—") -> SafeString:
    """`value` as a <time> element (UTC, converted to local time by console.js);
    `empty` when there is none. `precision`: "minutes" (default), "seconds" or "time"."""
    if value is None or value == "":
        return format_html("{}", empty)
    utc = value.astimezone(UTC)
    shown = utc.strftime(FORMATS.get(precision, FORMATS["minutes"]))
    return format_html(
        '<time datetime="{}" title="{} UTC" data-local="{}">{}</time>',
        utc.isoformat(timespec="seconds"),
        utc.strftime(FORMATS["seconds"]),
        precision if precision in FORMATS else "minutes",
        shown,
    )


def moment(value: datetime) -> str:
    """An absolute time for text read later (an e-mail, a chat message): "7 Dec 2026,
    14:05 UTC". It stays true however late it is read, unlike "in 2 min"."""
    utc = value.astimezone(UTC)
    return f"{utc.day} {utc:%b %Y, %H:%M} UTC"


def waited(since: datetime, now: datetime) -> str:
    """A wait as people say it: "just now", "2 min", "1 h 5 min", "3 days"."""
    minutes = int(max(0.0, (now - since).total_seconds()) // 60)
    if minutes < 1:
        return "just now"
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{hours // 24} days"


def ago(since: datetime, now: datetime) -> str:
    """ "just now", "3 min ago"."""
    said = waited(since, now)
    return said if said == "just now" else f"{said} ago"


@register.filter(name="waited")
def waited_filter(value: datetime | None, now: datetime | None = None) -> str:
    """`{{ since|waited:now }}`: how long since `value`, as `waited` says it."""
    if value is None:
        return ""
    return waited(value, now or datetime.now(UTC))
