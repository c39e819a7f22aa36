"""A call on the run page in plain words (traces/console/words.py, templates/traces/run.html):
its approval in the past tense once decided, with the catalog's one wording for undoing
(toolops/tools/reversibility.py) — never "cannot be undone" for a charge a refund undoes —
its undo as "Undo of step 3: Refund charge ch_1 — failed (try 1) · support ticket #4",
and no jargon outside the Technical details disclosures, where the ids still are."""

from __future__ import annotations

import re
from datetime import timedelta
from html.parser import HTMLParser
from typing import Any

import pytest
from django.test import Client

from compensations.models import Ticket
from tests.console.conftest import logged_in, make_user
from toolops.models import Agent, Approval, Run, ToolCall

from .purchase import REFUND, T0, at, demo_catalog, purchase, undo  # noqa: F401 - a fixture

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("demo_catalog")]
JARGON = re.compile(
    r"compensation|fence|idempoten|\blease\b|\bspans?\b|~undo|trace_id|session_key|"
    r"call_id|dead.letter",
    re.I,
)


class Plain(HTMLParser):
    """The text of <main> a person reads without opening a Technical details disclosure
    (what the tags' attributes hold is not read)."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.depth = 0  # inside <main>
        self.hidden = 0  # <details class="technical"> levels, counted by their <details>
        self.parts: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.depth += tag == "main"
        if tag == "details" and (self.hidden or "technical" in (dict(attrs).get("class") or "")):
            self.hidden += 1

    def handle_endtag(self, tag: str) -> None:
        self.depth -= tag == "main"
        if tag == "details" and self.hidden:
            self.hidden -= 1

    def handle_data(self, data: str) -> None:
        if self.depth and not self.hidden:
            self.parts.append(data)

    @property
    def text(self) -> str:
        return re.sub(r"\s+", " ", " ".join(self.parts))


@pytest.fixture
def rita(django_user_model: Any, settings: Any) -> Any:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return make_user(django_user_model, "rita", "reviewers")


def line(page: str, css: str, tool_call_id: str) -> str:
    """The text of the first element of class `css` in the lane of `tool_call_id`."""
    lane = page.split(f'data-tool-call-id="{tool_call_id}"')[1].split("</tbody>")[0]
    found = re.search(rf'<p class="{css}">(.*?)</p>', lane, re.S)
    assert found is not None, f"no {css} for {tool_call_id}"
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", found[1])).strip()


def held(run: Run, call: ToolCall, status: str, by: Any, **fields: Any) -> Approval:
    approval = Approval.objects.create(
        run=run,
        tool=call.tool,
        reason=fields.pop("reason", "irreversible"),
        args_hash="h",
        status=status,
        expires_at=at(1800),
        decided_by=by,
        created_at=at(2),
        **fields,
    )
    ToolCall.objects.filter(pk=call.pk).update(approval=approval)
    return approval


def test_a_decided_approval_reads_in_the_past_tense_with_the_catalogs_undo(
    rita: Any, agent_a: tuple[Agent, str]
) -> None:
    run, (_, order, charge) = purchase(agent_a[0], "r-approved", "completed")
    held(run, order, "approved", rita, decided_at=at(65), reason="policy")
    held(run, charge, "rejected", rita, decided_at=T0 + timedelta(minutes=5), note="too much")

    page = logged_in(rita).get(f"/console/runs/{run.pk}/").content.decode()

    assert line(page, "approval-line", "tc-2") == (
        "Approved by rita at 14:01:05 — undone only by cancel_order. Open the approval"
    )
    assert line(page, "approval-line", "tc-3") == (
        "Rejected by rita at 14:05:00 — nothing was sent. Note: “too much” Open the approval"
    )
    # The approval's stored reason is no longer what the page says of undoing.
    assert "cannot be undone" not in page


def test_a_waiting_or_expired_approval_says_so(rita: Any, agent_a: tuple[Agent, str]) -> None:
    run, (_, order, charge) = purchase(agent_a[0], "r-held", "running")
    ToolCall.objects.filter(pk__in=[order.pk, charge.pk]).update(status="pending_approval")
    held(run, order, "pending", None, reason="possible_duplicate")
    held(run, charge, "expired", None)

    page = logged_in(rita).get(f"/console/runs/{run.pk}/").content.decode()

    assert line(page, "approval-line", "tc-2") == (
        "Waiting for a reviewer's approval since 14:00:02 (held as a possible duplicate) — "
        "undone only by cancel_order. Open the approval"
    )
    assert line(page, "approval-line", "tc-3") == (
        "Not approved in time: the approval expired at 14:30:00 — nothing was sent. "
        "Open the approval"
    )


def test_undo_calls_and_the_calls_they_undo_say_so_in_words(
    django_user_model: Any, settings: Any, agent_a: tuple[Agent, str]
) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    sam = make_user(django_user_model, "sam", "support")
    run, (reserve, order, charge) = purchase(agent_a[0], "r-words", "compensation_failed")
    undo(reserve, "succeeded", rounds=("succeeded",))
    undo(order, "succeeded", rounds=("succeeded",))
    undo(charge, "dead_lettered", rounds=("failed",), ticket="open")
    ticket = Ticket.objects.get()
    refund = ToolCall.objects.get(tool="refund")
    client: Client = logged_in(sam)

    page = client.get(f"/console/runs/{run.pk}/").content.decode()

    assert line(page, "undo-line", refund.tool_call_id) == (
        f"Undo of step 3: {REFUND} — failed (try 1) · support ticket #{ticket.pk}. "
        "It takes back Charge 89.00 EUR to customer cus_42 for order ord_1."
    )
    assert line(page, "undo-line", "tc-3") == (
        f"Undo: {REFUND} — failed · support ticket #{ticket.pk}."
    )
    assert f'<a href="/console/tickets/{ticket.pk}/">support ticket #{ticket.pk}</a>' in page
    assert line(page, "undo-line", "tc-1") == "Undo: Release stock reservation res_1 — done."
    assert line(page, "error-line", refund.tool_call_id) == (
        "What went wrong: the payments service answered 503 (unavailable)"
    )
    assert '<span class="badge s-compensation_failed">aborted, an undo failed</span>' in page
    # The jargon is on the page, only under Technical details.
    assert refund.tool_call_id in page and "Compensations (3)" in page
    plain = Plain(page).text
    assert JARGON.findall(plain) == [], plain
    assert f"Undo of step 3: {REFUND}" in plain
