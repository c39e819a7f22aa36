"""Every metric the alert rules and the Grafana dashboard read is one a real ToolOps web
process exports: a server on the test database, with calls, retries, replays, an open
breaker, an unknown outcome, an open ticket, approvals and a failed notification behind
it, scraped over HTTP with the token, as Prometheus would (deploy/prometheus/). A metric
renamed in traces/metrics.py, or a label or label value that the code never writes,
fails here rather than leaving an alert that can never fire."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from compensations.models import Compensation, Ticket
from tests.conftest import Shop
from tests.deploy.promql import Scraped, dashboard, dashboard_exprs, problems, recorded, rules
from tests.traces.metrics_scenario import run_scenario
from toolops.approvals.models import Approval
from toolops.models import Agent, CircuitBreaker, Run, ToolCall
from toolops.notify.models import NotificationDelivery, NotificationEvent
from toolops.services import agent_create

TOKEN = "scrape-token-for-the-test"


def scraped_labels(text: str) -> Scraped:
    """Each sample name → its labels → the values seen."""
    found: Scraped = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = found.setdefault(sample.name, {})
            for label, value in sample.labels.items():
                labels.setdefault(label, set()).add(value)
    return found


def waiting_rows(agent: Agent) -> None:
    """One of each thing that waits for a person, and an open breaker."""
    run = Run.objects.create(agent=agent, run_id="r-waiting", trace_id=uuid.uuid4().hex)
    call = ToolCall.objects.create(
        run=run,
        step_index=0,
        tool="charge",
        status="unknown",
        args_digest="x",
        call_id="c-unknown",
        tool_call_id="tc-unknown",
    )
    compensation = Compensation.objects.create(
        run=run, call=call, tool="refund", key=uuid.uuid4().hex, status="dead_lettered"
    )
    Ticket.objects.create(
        compensation=compensation, run=run, tool="refund", reason=Ticket.Reason.DEAD_LETTERED
    )
    Approval.objects.create(
        run=run,
        tool="charge",
        reason="irreversible",
        args_hash="x",
        expires_at=run.created_at + timedelta(minutes=2),
    )
    CircuitBreaker.objects.create(
        tool="create_order", state="open", open_until=run.created_at + timedelta(minutes=5)
    )
    event = NotificationEvent.objects.create(key="ticket_opened:1", kind="ticket_opened", ref="1")
    NotificationDelivery.objects.create(
        event=event, channel="email", target="ops@example.com", status="failed", attempts=5
    )


def test_every_metric_the_rules_and_the_dashboard_read_is_exported(
    toolops_server: Any, shop: Shop
) -> None:
    server = toolops_server(TOOLOPS_METRICS_TOKEN=TOKEN)
    agent, key = agent_create(name="agent-metrics")
    with httpx.Client(base_url=server.url, timeout=30) as http:

        def post(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
            response = http.post(path, json=body, headers={"Authorization": f"Bearer {key}"})
            return response.status_code, response.json()

        run_scenario(post, shop)
        waiting_rows(agent)
        response = http.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})

    assert response.status_code == 200, response.text
    scraped = scraped_labels(response.text)
    # The rows are behind it: the gauges the alerts read are not all zeros.
    values = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }
    assert values[("toolops_breaker_state", (("tool", "create_order"),))] == 2
    assert values[("toolops_dead_letters_open", ())] == 1
    assert values[("toolops_approvals_expiring", ())] == 1
    assert values[("toolops_unknown_calls", (("tool", "charge"),))] == 1
    assert values[("toolops_notifications_failed", (("channel", "email"),))] == 1

    records = recorded()
    found = {
        f"rule {rule.get('alert') or rule['record']}: {problem}"
        for rule in rules()
        for problem in problems(rule["expr"], scraped, records)
    }
    found |= {
        f"dashboard: {problem}"
        for expr in dashboard_exprs(dashboard())
        for problem in problems(expr, scraped, set())
    }
    assert not found, sorted(found)


# The checker itself, on a scrape written out: it must be able to fail.

SCRAPE = """\
# TYPE toolops_tool_calls_total counter
toolops_tool_calls_total{status="succeeded",tool="charge"} 3.0
# TYPE toolops_dead_letters_open gauge
toolops_dead_letters_open 1.0
"""


def test_a_name_the_code_does_not_export_is_caught() -> None:
    scraped = scraped_labels(SCRAPE)

    assert problems("max(toolops_dead_letters_open) > 0", scraped, set()) == []
    assert problems("max(toolops_dead_letter_open) > 0", scraped, set()) == [
        "toolops_dead_letter_open is not in /metrics"
    ]
    assert problems("toolops:ratio > 1", scraped, {"toolops:ratio"}) == []
    assert problems("toolops:ratio > 1", scraped, set()) == ["toolops:ratio is not in /metrics"]
    assert problems("rate(node_cpu_seconds_total[5m])", scraped, set()) == [
        "node_cpu_seconds_total is not in /metrics"
    ]


def test_a_label_or_value_the_code_never_writes_is_caught() -> None:
    scraped = scraped_labels(SCRAPE)

    ok = 'sum by (tool) (increase(toolops_tool_calls_total{status="succeeded",job="x"}[5m]))'
    assert problems(ok, scraped, set()) == []
    assert problems('toolops_tool_calls_total{outcome="ok"}', scraped, set()) == [
        "toolops_tool_calls_total has no label 'outcome'"
    ]
    assert problems('toolops_tool_calls_total{status="success"}', scraped, set()) == [
        "toolops_tool_calls_total never has status='success'"
    ]
    assert problems("sum by (channel) (toolops_tool_calls_total)", scraped, set()) == [
        "no /metrics sample has the label 'channel'"
    ]
