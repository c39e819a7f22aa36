"""Every time the console shows, in one format: `{% when value %}` renders
`<time datetime="ISO" title="2026-12-02 00:06:05 UTC">2026-12-02 00:06</time>`.

The server writes UTC, so a page without JavaScript is still exact; console.js rewrites
the text into the viewer's local time and leaves the UTC time in the title, on hover.
`{{ value|ago:now }}` is a wait in words ("just now" under a minute, "3 minutes" …)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.timesince import timesince

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


@register.filter
def ago(value: datetime | None, now: datetime | None = None) -> str:
    """How long since `value`, in words: "just now" under a minute (never "0 minutes")."""
    if value is None:
        return ""
    now = now or datetime.now(UTC)
    if now - value < timedelta(minutes=1):
        return "just now"
    return timesince(value, now)
