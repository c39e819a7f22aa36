"""The agent policy's metrics (API.md "Agent policy", docs/policy.md), read from the
tables on each scrape like every other ToolOps metric (traces/metrics.py):

    toolops_policy_decisions_total{rule,action}    calls each rule decided, by action
                                                   (log_only ones as would_<action>)
    toolops_policy_spend{limit,agent,currency}     spent this period, per agent
    toolops_policy_spend_max{limit}                the limit's max

Spend is in the limit's own terms: calls for a count, the summed field's amount for a
sum. Agents appear only once they spent something under a limit."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from decimal import Decimal

from django.db.models import Count
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from toolops.models import ToolCall
from toolops.policy import active, limits
from toolops.policy.models import SpendCounter


def policy_families() -> Iterator[Metric]:
    yield _decisions()
    yield from _spend()


def _decisions() -> Metric:
    # Grouped by the whole list: few distinct lists, however many calls.
    rows = (
        ToolCall.objects.filter(policy_rules__isnull=False)
        .order_by()
        .values_list("policy_rules")
        .annotate(n=Count("pk"))
    )
    counts: Counter[tuple[str, str]] = Counter()
    for decided, n in rows:
        for rule, action in decided or ():
            counts[(str(rule), str(action))] += n
    family = CounterMetricFamily(
        "toolops_policy_decisions",
        "Calls the agent policy's rules decided, by rule and action.",
        labels=["rule", "action"],
    )
    for (rule, action), n in sorted(counts.items()):
        family.add_metric([rule, action], n)
    return family


def _spend() -> Iterator[Metric]:
    spent = GaugeMetricFamily(
        "toolops_policy_spend",
        "Spent under each limit this period, per agent (calls, or the summed amount).",
        labels=["limit", "agent", "currency"],
    )
    cap = GaugeMetricFamily(
        "toolops_policy_spend_max", "Each limit's max (calls, or an amount).", labels=["limit"]
    )
    policy = active.current()
    for limit in policy.document.limits if policy is not None else ():
        scale = Decimal(1) if limit.counts else limits.SCALE
        cap.add_metric([limit.name], float(limit.max))
        period = limits.period(limit).key
        rows = SpendCounter.objects.filter(limit=limit.name, period=period).values_list(
            "agent__name", "currency", "spent"
        )
        for agent, currency, units in rows:
            spent.add_metric([limit.name, agent, currency], float(Decimal(units) / scale))
    yield spent
    yield cap
