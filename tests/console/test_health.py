"""Tool health: breakers and failure rates for every tool, in a constant number of queries;
operators force a breaker open or reset it, audited; everyone else gets a 403."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from toolops.executor import breaker
from toolops.models import Agent, Attempt, AuditEntry, CircuitBreaker, Run, ToolCall
from toolops.tools import registry

from .conftest import logged_in, make_attempt, make_call, make_run

pytestmark = pytest.mark.django_db

BREAKERS = AuditEntry.objects.filter(action__startswith="breaker.")
FORCE = "/console/health/create_order/force-open/"
RESET = "/console/health/create_order/reset/"


def force_data(minutes: str = "45", reason: str = "orders DB failover") -> dict[str, str]:
    return {
        "create_order-minutes": minutes,
        "create_order-reason": reason,
        "create_order-confirm": "on",
    }


@pytest.fixture
def call(agent_a: tuple[Agent, str]) -> ToolCall:
    run: Run = make_run(agent_a[0], "r-health")
    return make_call(run, "tc-h", 0, "create_order", "succeeded")


def attempts(
    call: ToolCall, tool: str, seconds_ago: float, *healths: str, duration_ms: float = 10.0
) -> None:
    """One Attempt per health, started `seconds_ago`, straight into the table."""
    start = timezone.now() - timedelta(seconds=seconds_ago)
    number = Attempt.objects.filter(call=call).count()
    for health in healths:
        number += 1
        make_attempt(
            call, number, tool=tool, health=health, started_at=start, duration_ms=duration_ms
        )


def rows_by_tool(response: Any) -> dict[str, Any]:
    return {row.spec.name: row for row in response.context["rows"]}


def breaker_fields(tool: str = "create_order") -> tuple[Any, ...] | None:
    row = CircuitBreaker.objects.filter(tool=tool).first()
    if row is None:
        return None
    return (row.state, row.forced, row.consecutive_failures, row.open_until, row.reason)


# -- the page ------------------------------------------------------------------------------


def test_it_lists_every_tool_public_first_with_closed_breakers(
    reviewer_client: Client, console_catalog: Any
) -> None:
    response = reviewer_client.get("/console/health/")

    assert response.status_code == 200
    names = list(rows_by_tool(response))
    # Python tools registered in code (quote_total) join the catalog's.
    specs = registry.load().values()
    assert names == [s.name for s in sorted(specs, key=lambda s: (s.internal, s.name))]
    assert names.index("send_notification") < names.index("cancel_order")  # public first
    assert {"create_order", "flaky_warehouse", "query_order", "cancel_order"} <= set(names)
    assert {row.state for row in response.context["rows"]} == {"closed"}
    page = response.content.decode()
    assert '<span class="badge b-closed">closed</span>' in page
    assert "Force open" not in page and ">Reset<" not in page  # reviewers only read
    assert 'aria-current="page">Tool health' in page


def test_it_shows_a_tripped_and_a_forced_breaker(
    reviewer_client: Client, console_catalog: Any
) -> None:
    opened = timezone.now() - timedelta(seconds=20)
    CircuitBreaker.objects.create(
        tool="flaky_warehouse",
        state="open",
        consecutive_failures=3,
        opened_at=opened,
        open_until=opened + timedelta(seconds=60),
        reason="3 consecutive failures",
    )
    breaker.breaker_force_open(
        tool="send_notification", seconds=600, reason="mail relay blacklisted"
    )
    CircuitBreaker.objects.create(
        tool="query_order",
        state="half_open",
        consecutive_failures=1,
        probe_until=timezone.now() + timedelta(seconds=7),
    )

    response = reviewer_client.get("/console/health/")

    rows = rows_by_tool(response)
    assert [rows[t].state for t in ("flaky_warehouse", "send_notification", "query_order")] == [
        "open",
        "open",
        "half_open",
    ]
    page = response.content.decode()
    flaky = page.split('id="health-flaky_warehouse"')[1].split("</tr>")[0]
    assert '<span class="badge b-open">open</span>' in flaky
    assert "forced" not in flaky
    assert "3 / 3" in flaky  # consecutive failures / the tool's threshold
    assert opened.strftime("%Y-%m-%d %H:%M:%S") in flaky
    assert (opened + timedelta(seconds=60)).strftime("%Y-%m-%d %H:%M:%S") in flaky
    assert "3 consecutive failures" in flaky
    notify = page.split('id="health-send_notification"')[1].split("</tr>")[0]
    assert '<span class="badge forced" title="Held open by an operator">forced</span>' in notify
    assert "mail relay blacklisted" in notify
    assert "0 / 5" in notify
    half = page.split('id="health-query_order"')[1].split("</tr>")[0]
    assert '<span class="badge b-half_open">half-open</span>' in half
    assert "a probe call is under way until" in half


def test_it_computes_failure_rates_over_each_tools_own_window(
    reviewer_client: Client, console_catalog: Any, call: ToolCall
) -> None:
    # create_order: the default 60 s window.
    attempts(call, "create_order", 5, "failure", "failure", "failure", "success", duration_ms=100.0)
    attempts(call, "create_order", 5, "neutral", "neutral", duration_ms=100.0)  # no say
    attempts(call, "create_order", 120, "failure", "failure", "failure")  # before the window
    # flaky_warehouse: a 10 s window; the failure 30 s ago is outside it.
    attempts(call, "flaky_warehouse", 2, "failure", "success", duration_ms=40.0)
    attempts(call, "flaky_warehouse", 3, "failure", duration_ms=60.0)
    attempts(call, "flaky_warehouse", 30, "failure")
    # Another tool's attempts never leak in.
    attempts(call, "not_in_catalog", 1, "failure")

    response = reviewer_client.get("/console/health/")

    rows = rows_by_tool(response)
    order, flaky, notify = rows["create_order"], rows["flaky_warehouse"], rows["send_notification"]
    assert (order.failed, order.counted, order.rate) == (3, 4, 0.75)
    assert (flaky.failed, flaky.counted) == (2, 3)
    assert (notify.failed, notify.counted, notify.rate) == (0, 0, None)
    # p50 over the window's attempts (PostgreSQL's percentile_cont).
    assert order.p50_ms == 100.0
    assert flaky.p50_ms == 40.0  # of 40, 40 and 60
    assert notify.p50_ms is None
    # At or over the tool's threshold with enough attempts: what the breaker trips on.
    assert flaky.rate_over_threshold  # 67% ≥ 50%, 3 ≥ 2 attempts
    assert not order.rate_over_threshold  # 75%, but fewer than the default 10 attempts
    page = response.content.decode()
    order_html = page.split('id="health-create_order"')[1].split("</tr>")[0]
    assert "3 / 4" in order_html and "75%" in order_html and "over 60 s" in order_html
    flaky_html = page.split('id="health-flaky_warehouse"')[1].split("</tr>")[0]
    assert 'class="num over"' in flaky_html and "67%" in flaky_html
    assert "over 10 s" in flaky_html


# session, user, the user's groups, the three nav counts, the breakers, their states as
# the next call sees them, the attempts (one grouped query for every tool).
HEALTH_QUERIES = 9


@pytest.mark.parametrize("busy", [False, True])
def test_it_shows_every_tool_in_a_constant_number_of_queries(
    operator_client: Client,
    console_catalog: Any,
    call: ToolCall,
    django_assert_num_queries: Any,
    busy: bool,
) -> None:
    if busy:
        for name in registry.load():
            attempts(call, name, 1, "failure", "success", "neutral")
            breaker.breaker_force_open(tool=name, seconds=60, reason="busy")

    with django_assert_num_queries(HEALTH_QUERIES):
        response = operator_client.get("/console/health/")

    assert len(response.context["rows"]) == len(registry.load())


def test_it_says_when_the_catalog_cannot_be_loaded(
    reviewer_client: Client, settings: Any, tmp_path: Any
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[[tool]]\nname = 'x'\n")
    settings.TOOLOPS_TOOLS_FILE = str(bad)
    registry.reset()
    try:
        response = reviewer_client.get("/console/health/")
    finally:
        registry.reset()

    assert response.status_code == 200
    assert b"The tool catalog could not be loaded" in response.content


# -- force open and reset ------------------------------------------------------------------


def test_it_forces_a_breaker_open_and_audits_it(
    operator: Any, operator_client: Client, console_catalog: Any
) -> None:
    before = timezone.now()

    response = operator_client.post(FORCE, force_data())

    assert response.status_code == 302
    assert response["Location"] == "/console/health/"
    row = CircuitBreaker.objects.get(tool="create_order")
    assert (row.state, row.forced, row.reason) == ("open", True, "orders DB failover")
    assert (
        before + timedelta(minutes=45) <= row.open_until <= timezone.now() + timedelta(minutes=45)
    )
    entry = BREAKERS.get()
    assert (entry.actor, entry.action, entry.object_id) == (
        operator,
        "breaker.force_open",
        row.tool,
    )
    assert (entry.object_type, entry.object_url) == ("breaker", "/console/health/")
    assert entry.summary == "Forced open for 45 min. Reason: orders DB failover"
    assert entry.detail == {"minutes": 45, "reason": "orders DB failover"}
    # The executor refuses the tool now.
    admission = breaker.admit(registry.get("create_order"))  # type: ignore[arg-type]
    assert not admission.allowed
    page = operator_client.get("/console/health/").content.decode()
    assert "Breaker for create_order held open for 45 min (until " in page
    order = page.split('id="health-create_order"')[1].split("</tr>")[0]
    assert '<span class="badge b-open">open</span>' in order and "forced" in order


def test_it_forces_open_a_breaker_that_had_tripped(
    operator_client: Client, console_catalog: Any
) -> None:
    CircuitBreaker.objects.create(
        tool="create_order", state="open", consecutive_failures=5, reason="5 consecutive failures"
    )

    operator_client.post(FORCE, force_data(minutes="1440", reason="hold it"))

    row = CircuitBreaker.objects.get(tool="create_order")
    assert (row.state, row.forced, row.reason) == ("open", True, "hold it")
    assert CircuitBreaker.objects.count() == 1


def test_it_resets_a_forced_breaker_and_audits_it(
    operator: Any, operator_client: Client, console_catalog: Any
) -> None:
    breaker.breaker_force_open(tool="create_order", seconds=600, reason="maintenance")
    CircuitBreaker.objects.filter(tool="create_order").update(consecutive_failures=4)

    response = operator_client.post(RESET)

    assert response.status_code == 302
    assert response["Location"] == "/console/health/"
    row = CircuitBreaker.objects.get(tool="create_order")
    assert (row.state, row.forced, row.consecutive_failures) == ("closed", False, 0)
    assert (row.open_until, row.reason) == (None, "")
    entry = BREAKERS.get()
    assert (entry.actor, entry.action, entry.object_id) == (operator, "breaker.reset", row.tool)
    assert entry.summary == "Reset: open (forced) → closed; consecutive failures 4 → 0."
    assert breaker.admit(registry.get("create_order")).allowed  # type: ignore[arg-type]
    page = operator_client.get("/console/health/").content.decode()
    assert "Breaker for create_order reset: closed, failure count cleared." in page


def test_it_resets_nothing_when_the_breaker_never_tripped(
    operator_client: Client, console_catalog: Any
) -> None:
    response = operator_client.post(RESET, follow=True)

    assert b"The breaker for create_order never tripped: nothing to reset." in response.content
    assert not CircuitBreaker.objects.exists()
    assert not BREAKERS.exists()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (force_data(minutes="0"), "Minutes: Ensure this value is greater than or equal to 1."),
        (force_data(minutes="1441"), "Minutes: Ensure this value is less than or equal to 1440."),
        (force_data(minutes="abc"), "Minutes: Enter a whole number."),
        (force_data(minutes="2.5"), "Minutes: Enter a whole number."),
        (force_data(minutes=""), "Minutes: This field is required."),
        (force_data(reason=""), "Reason: This field is required."),
        (force_data(reason="   "), "Reason: This field is required."),
        (force_data(reason="x" * 201), "Reason: Ensure this value has at most 200 characters"),
        ({"minutes": "30", "reason": "unprefixed"}, "Reason: This field is required."),
    ],
)
def test_it_rejects_bad_input_and_changes_nothing(
    operator_client: Client, console_catalog: Any, data: dict[str, str], message: str
) -> None:
    CircuitBreaker.objects.create(tool="create_order", consecutive_failures=2)
    before = breaker_fields()

    response = operator_client.post(FORCE, data)

    assert response.status_code == 200
    page = response.content.decode()
    assert "The breaker for <code>create_order</code> was not changed" in page
    # The error shows on the tool's own row, with what was typed kept.
    order = page.split('id="health-create_order"')[1].split("</tr>")[0]
    assert message in order
    assert breaker_fields() == before
    assert not BREAKERS.exists()


@pytest.mark.parametrize("persona", ["reviewer", "support"])
@pytest.mark.parametrize("url", [FORCE, RESET])
def test_it_forbids_non_operators(
    persona: str, url: str, request: Any, console_catalog: Any
) -> None:
    breaker.breaker_force_open(tool="create_order", seconds=60, reason="held")
    before = breaker_fields()
    client = logged_in(request.getfixturevalue(persona))

    response = client.post(url, force_data())

    assert response.status_code == 403
    assert b"Only operators may open or reset circuit breakers." in response.content
    assert breaker_fields() == before
    assert not BREAKERS.exists()


def test_it_forbids_outsiders_and_sends_anonymous_users_to_login(
    client: Client, outsider: Any, console_catalog: Any
) -> None:
    assert logged_in(outsider).post(FORCE, force_data()).status_code == 403
    assert logged_in(outsider).get("/console/health/").status_code == 403
    response = client.post(FORCE, force_data())
    assert response.status_code == 302
    assert response["Location"].startswith("/console/login/")
    assert not CircuitBreaker.objects.exists()


def test_it_refuses_a_force_open_that_was_not_confirmed(
    operator_client: Client, console_catalog: Any
) -> None:
    data = force_data()
    del data["create_order-confirm"]

    response = operator_client.post(FORCE, data)

    assert response.status_code == 200
    page = response.content.decode()
    assert "The breaker for <code>create_order</code> was not changed" in page
    assert "tick “I understand” to confirm holding the breaker open" in page
    assert not CircuitBreaker.objects.exists()
    assert not BREAKERS.exists()


def test_it_lets_a_superuser_force_and_reset(superuser: Any, console_catalog: Any) -> None:
    client = logged_in(superuser)

    assert client.post(FORCE, force_data()).status_code == 302
    assert CircuitBreaker.objects.get().forced
    assert client.post(RESET).status_code == 302
    assert not CircuitBreaker.objects.get().forced
    assert BREAKERS.filter(actor=superuser).count() == 2


def test_it_answers_405_to_a_get_and_404_to_an_unknown_tool(
    operator_client: Client, console_catalog: Any
) -> None:
    assert operator_client.get(FORCE).status_code == 405
    assert operator_client.get(RESET).status_code == 405
    assert (
        operator_client.post(
            "/console/health/nope/force-open/", {"nope-minutes": "5", "nope-reason": "x"}
        ).status_code
        == 404
    )
    assert operator_client.post("/console/health/nope/reset/").status_code == 404
    assert not CircuitBreaker.objects.exists()
    assert not BREAKERS.exists()


def test_it_shows_operators_the_controls_for_every_tool(
    operator_client: Client, console_catalog: Any
) -> None:
    page = operator_client.get("/console/health/").content.decode()

    for name in registry.load():
        assert f'action="/console/health/{name}/force-open/"' in page
        assert f'action="/console/health/{name}/reset/"' in page
    assert 'name="create_order-minutes" value="30"' in page  # the default duration
