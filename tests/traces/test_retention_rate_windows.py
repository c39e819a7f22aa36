"""The retention purge removes agents' dead rate windows (toolops/api/allowance.py): any
before the last minute, whatever the retention; the current and the last one stay."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.db import connection

from toolops.models import Agent, RateWindow
from toolops.services import agent_create
from traces import retention
from traces.retention import retention_purge

pytestmark = pytest.mark.django_db


def test_it_purges_dead_rate_windows_and_keeps_the_current_and_the_last(agent_a: Any) -> None:
    other, _ = agent_create(name="other", rate_limit_per_minute=60)
    now = int(time.time() // 60)
    for agent in (agent_a[0], other):
        for window in (now - 600, now - 3, now - 2, now - 1, now):
            RateWindow.objects.create(agent=agent, window=window, count=7)

    counts = retention_purge(days=30, batch=2)

    assert counts["toolops.RateWindow"] == 6
    left = set(RateWindow.objects.values_list("agent__name", "window"))
    assert left == {(a.name, w) for a in (agent_a[0], other) for w in (now - 1, now)}
    assert retention_purge(days=30).get("toolops.RateWindow", 0) == 0  # nothing twice


def test_it_purges_nothing_else_for_them(agent_a: Any) -> None:
    """The windows are not counted in days: a longer retention changes nothing for them,
    and an empty table reports nothing."""
    assert "toolops.RateWindow" not in retention_purge(days=30)
    RateWindow.objects.create(agent=agent_a[0], window=int(time.time() // 60) - 5, count=1)

    assert retention_purge(days=3000)["toolops.RateWindow"] == 1


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the plan is PostgreSQL's")
def test_the_purge_finds_the_dead_windows_through_indexes() -> None:
    # As an hourly purge finds the table at worst: the agents counted without Redis, each
    # with a window for every minute of the last two hours.
    agents = Agent.objects.bulk_create(
        Agent(name=f"a{n}", token_hash=f"h{n}", token_hint="t") for n in range(60)
    )
    now = int(time.time() // 60)
    RateWindow.objects.bulk_create(
        RateWindow(agent=agent, window=now - n, count=1) for agent in agents for n in range(120)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE toolops_ratewindow")

    dead = retention.rate_windows_dead(agent_id=agents[0].pk, minute=now)
    select = dead.values("pk")[: retention.BATCH].explain()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {retention.distinct_values_sql(RateWindow, 'agent')}")
        walk = "\n".join(row[0] for row in cursor.fetchall())

    # One agent's windows from an index leading with the agent (its foreign key's, or
    # rate_window_unique), and the agents by one index probe apiece: never the table.
    assert "Index" in select and "Seq Scan" not in select, select
    assert "Index" in walk and "Seq Scan" not in walk, walk
    assert retention.distinct_values(RateWindow, "agent") == sorted(a.pk for a in agents)


def test_the_index_walk_refuses_what_is_not_a_column_of_the_table() -> None:
    # Agent's reverse relation to its windows has no column in the agents table.
    with pytest.raises(ValueError, match="toolops.Agent.ratewindow is not a column"):
        retention.distinct_values_sql(Agent, "ratewindow")
