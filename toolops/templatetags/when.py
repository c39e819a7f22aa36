"""Every time the console shows, in one format: `{% when value %}` renders
`<time datetime="ISO" title="2026-12-02 00:06:05 UTC">2026-12-02 00:06</time>`.

The server writes UTC, so a page without JavaScript is still exact; console.js rewrites
the text into the viewer's local time and leaves the UTC time in the title, on hover.
`waited` says a wait in words, the same on every page and in every view ("just now",
"2 min", "1 h 5 min"); `{{ value|waited:now }}` in a template. In sentences (a ticket's
facts, an e-mail, the desk's thread) a time is said absolute, in UTC, said so: `at_words`
"06:30 UTC (in 4 min)" on a page, `day_words` "7 Dec 2026 at 06:31 UTC" in text read
later, when "in 4 min" would be false."""

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


def relative(when: datetime, now: datetime) -> str:
    """ "in 4 min", "3 min ago", "just now"."""
    if when <= now:
        return ago(when, now)
    said = waited(now, when)
    return "in under a minute" if said == "just now" else f"in {said}"


def clock(when: datetime, now: datetime) -> str:
    """The absolute time, as short as it can be: "06:30 UTC" today, else with its day."""
    utc, today = when.astimezone(UTC), now.astimezone(UTC).date()
    if utc.date() == today:
        return f"{utc:%H:%M} UTC"
    return f"{utc.day} {utc:%b %Y} {utc:%H:%M} UTC"


def at_words(when: datetime, now: datetime) -> str:
    """ "06:30 UTC (in 4 min)", "6 Dec 2026 22:10 UTC (8 h 20 min ago)"."""
    return f"{clock(when, now)} ({relative(when, now)})"


def day_words(when: datetime) -> str:
    """ "7 Dec 2026 at 06:31 UTC": when something happened for good."""
    utc = when.astimezone(UTC)
    return f"{utc.day} {utc:%b %Y} at {utc:%H:%M} UTC"
