"""/console/audit/ (API.md "Processes and settings"): operators and superusers see every
human action, newest first, filtered by person, action and date in the URL; a bad filter
is a clear 400 on the page, never a 500."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import transaction
from django.test import Client

from toolops.audit.models import AuditEntry
from toolops.audit.services import Action, Ref, audit_record

from .conftest import logged_in

pytestmark = pytest.mark.django_db

URL = "/console/audit/"


def entry(
    actor: Any,
    action: str,
    obj_id: str = "r-1",
    *,
    url: str = "",
    summary: str = "",
    at: datetime | None = None,
) -> AuditEntry:
    if at is not None:
        # Written as of another day (a test's shortcut: the service takes the DB's clock).
        return AuditEntry.objects.create(
            actor=actor,
            actor_username=actor.get_username(),
            action=action,
            object_type="run",
            object_id=obj_id,
            object_url=url,
            summary=summary,
            at=at,
        )
    with transaction.atomic():
        return audit_record(
            actor=actor, action=action, obj=Ref("run", obj_id, url), summary=summary
        )


def ids(response: Any) -> list[int]:
    return [e.pk for e in response.context["page"].entries]


def test_it_shows_operators_every_action_newest_first_with_its_link(
    operator_client: Client, operator: Any, support: Any
) -> None:
    first = entry(
        support, Action.TICKET_COMMENT, "7", url="/console/tickets/7/", summary="Called the shop."
    )
    second = entry(operator, Action.RUN_ABORT, "r-9", url="/console/runs/9/", summary="Aborted")

    response = operator_client.get(URL)

    assert response.status_code == 200
    assert ids(response) == [second.pk, first.pk]
    page = response.content.decode()
    assert '<a href="/console/tickets/7/"><code>7</code></a>' in page
    assert "Called the shop." in page and "ticket.comment" in page
    assert f'datetime="{first.at:%Y-%m-%dT%H:%M:%S}' in page
    assert '<a href="/console/audit/" aria-current="page">Audit log</a>' in page


def test_a_superuser_may_read_it(superuser: Any) -> None:
    assert logged_in(superuser).get(URL).status_code == 200


@pytest.mark.parametrize("persona", ["reviewer", "support", "outsider"])
def test_it_refuses_everyone_else(request: Any, persona: str) -> None:
    user = request.getfixturevalue(persona)

    response = logged_in(user).get(URL)

    assert response.status_code == 403
    assert "Audit log" not in logged_in(user).get("/console/tools/").content.decode()


def test_it_sends_anonymous_users_to_login() -> None:
    response = Client().get(URL)

    assert response.status_code == 302
    assert response["Location"].startswith("/console/login/")


def test_it_filters_by_person_action_and_dates(
    operator_client: Client, operator: Any, support: Any
) -> None:
    old = entry(support, Action.TICKET_RETRY, at=datetime(2026, 3, 1, 12, tzinfo=UTC))
    mid = entry(support, Action.TICKET_COMMENT, at=datetime(2026, 3, 5, 23, 59, tzinfo=UTC))
    new = entry(operator, Action.RUN_ABORT, at=datetime(2026, 3, 9, tzinfo=UTC))

    def get(**params: str) -> list[int]:
        response = operator_client.get(URL, params)
        assert response.status_code == 200
        return ids(response)

    assert get(actor="sam") == [mid.pk, old.pk]
    assert get(action="run.abort") == [new.pk]
    assert get(actor="sam", action="ticket.retry") == [old.pk]
    assert get(since="2026-03-05") == [new.pk, mid.pk]
    assert get(until="2026-03-05") == [mid.pk, old.pk]  # the whole of the last day
    assert get(since="2026-03-02", until="2026-03-08") == [mid.pk]
    assert get(actor="nobody") == []


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"since": "2026-13-45"}, "Enter a valid date."),
        ({"until": "yesterday"}, "Enter a valid date."),
        ({"action": "run.delete"}, "Select a valid choice."),
        ({"actor": "x" * 151}, "at most 150 characters"),
        ({"before": "-1"}, "greater than or equal to 1"),
        ({"before": "9" * 30}, "less than or equal to"),
        ({"since": "2026-03-09", "until": "2026-03-01"}, "is before"),
    ],
)
def test_it_refuses_a_bad_filter_clearly(
    operator_client: Client, operator: Any, params: dict[str, str], message: str
) -> None:
    entry(operator, Action.RUN_ABORT)

    response = operator_client.get(URL, params)

    assert response.status_code == 400
    page = response.content.decode()
    assert message in page
    assert ids(response) == []
    assert "Fix the filters above" in page


def test_it_pages_older_entries_with_the_filters_kept(
    operator_client: Client, operator: Any, settings: Any
) -> None:
    made = [entry(operator, Action.RUN_ABORT, f"r-{i}") for i in range(103)]
    entry(operator, Action.BREAKER_RESET)

    first = operator_client.get(URL, {"action": "run.abort"})
    assert ids(first) == [e.pk for e in reversed(made)][:100]
    older = first.context["older_query"]
    assert older == f"action=run.abort&before={made[3].pk}"
    second = operator_client.get(f"{URL}?{older}")
    assert ids(second) == [made[2].pk, made[1].pk, made[0].pk]
    assert second.context["older_query"] == ""
    assert 'href="?action=run.abort"' in second.content.decode()  # back to the newest


# session, user, the user's groups, the nav's three counts, the page of entries.
PAGE_QUERIES = 7


@pytest.mark.parametrize("count", [1, 40])
def test_it_shows_the_page_in_constant_queries(
    operator_client: Client, operator: Any, django_assert_num_queries: Any, count: int
) -> None:
    for i in range(count):
        entry(operator, Action.RUN_ABORT, f"r-{i}")

    with django_assert_num_queries(PAGE_QUERIES):
        response = operator_client.get(URL, {"actor": "olga"})

    assert len(ids(response)) == count


def test_it_has_no_inline_script_or_style(operator_client: Client, operator: Any) -> None:
    entry(operator, Action.RUN_ABORT, summary="<script>alert(1)</script>")

    page = operator_client.get(URL).content.decode()

    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)" in page
    assert "style=" not in page
    body = page.split("<body", 1)[1]
    assert "<script" not in body


def test_it_says_when_the_person_is_gone(operator_client: Client, django_user_model: Any) -> None:
    from .conftest import make_user

    gone = make_user(django_user_model, "gary", "operators")
    entry(gone, Action.BREAKER_FORCE_OPEN)
    gone.delete()

    page = operator_client.get(URL, {"actor": "gary"}).content.decode()

    assert "gary" in page and "account deleted" in page


def test_dates_are_shown_in_utc(operator_client: Client, operator: Any) -> None:
    made = entry(operator, Action.RUN_ABORT, at=datetime(2026, 3, 1, 12, 30, 5, tzinfo=UTC))

    page = operator_client.get(URL).content.decode()

    assert "2026-03-01 12:30:05" in page
    assert 'datetime="2026-03-01T12:30:05+00:00"' in page
    assert ids(operator_client.get(URL, {"since": "2026-03-01", "until": "2026-03-01"})) == [
        made.pk
    ]
    assert ids(operator_client.get(URL, {"since": "2026-03-02"})) == []
