"""Times in one format: `{% when %}` writes UTC with the full time on hover, for
console.js to turn into the viewer's local time; `ago` never says "0 minutes"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from django.template import Context, Template

from toolops.templatetags.when import ago, waited, when

AT = datetime(2026, 12, 2, 0, 6, 5, tzinfo=UTC)


def test_it_writes_one_time_element_in_utc() -> None:
    assert when(AT) == (
        '<time datetime="2026-12-02T00:06:05+00:00" title="2026-12-02 00:06:05 UTC" '
        'data-local="minutes">2026-12-02 00:06</time>'
    )
    # Another zone's time is the same instant, written in UTC.
    berlin = AT.astimezone(ZoneInfo("Europe/Berlin"))
    assert when(berlin) == when(AT)
    assert ">00:06:05</time>" in when(AT, "time")
    assert ">2026-12-02 00:06:05</time>" in when(AT, "seconds")


def test_it_says_a_dash_when_there_is_no_time() -> None:
    assert when(None) == "—"


def test_it_is_a_template_tag() -> None:
    html = Template("{% load when %}{% when at %}").render(Context({"at": AT}))

    assert html == when(AT)


def test_a_wait_is_said_one_way_and_never_0_minutes() -> None:
    assert ago(AT, AT + timedelta(seconds=59)) == "just now"
    assert ago(AT, AT + timedelta(minutes=3)) == "3 min ago"
    assert waited(AT, AT + timedelta(minutes=125)) == "2 h 5 min"
    assert waited(AT, AT + timedelta(days=3)) == "3 days"
    html = Template("{% load when %}{{ at|waited:now }}").render(
        Context({"at": AT, "now": AT + timedelta(minutes=2)})
    )
    assert html == "2 min"
