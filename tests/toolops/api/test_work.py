"""The work budget (toolops/api/work.py): each agent's request bodies are priced from
their bytes and paid from a bucket that refills at a steady rate; an agent in debt waits
the seconds until it is out of it, whatever other agents do."""

from __future__ import annotations

import json

import pytest

from toolops.api import work as work_module
from toolops.api.work import BYTES_PER_UNIT, WorkBudget, price


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_body_is_priced_by_the_values_it_can_hold_and_its_size() -> None:
    ordinary = json.dumps({"step_index": 1, "tool": "query_stock", "args": {"sku": "A12"}})
    wide = json.dumps({"args": {f"k{i}": i for i in range(1000)}})
    assert price(b"") == 0
    assert price(ordinary.encode()) < 20
    assert price(wide.encode()) >= 2000  # a colon and a comma a key
    assert price(b"x" * 64_000) == 1 + 64_000 // BYTES_PER_UNIT


def test_an_agent_within_its_budget_is_never_told_to_wait() -> None:
    clock = Clock()
    work = WorkBudget(per_s=10_000, burst=5000, clock=clock)
    for _ in range(1000):  # 40 units a request, 200 a second: 8,000 of 10,000 a second
        assert work.owed_s("a") == 0
        work.charge("a", 40)
        clock.now += 0.005
    assert work.owed_s("a") == 0


def test_one_expensive_body_passes_and_the_next_waits_until_the_debt_is_paid() -> None:
    clock = Clock()
    work = WorkBudget(per_s=1000, burst=5000, clock=clock)
    assert work.owed_s("a") == 0
    work.charge("a", 8000)  # 3000 in debt

    assert work.owed_s("a") == (3000 + 1) / 1000
    clock.now += 2.0
    assert 0 < work.owed_s("a") <= 1.001
    clock.now += 1.1
    assert work.owed_s("a") == 0


def test_one_agents_debt_is_its_own() -> None:
    work = WorkBudget(per_s=1000, burst=5000, clock=Clock())
    work.charge("a", 50_000)
    assert work.owed_s("a") > 40
    assert work.owed_s("b") == 0


def test_the_budget_refills_no_higher_than_the_burst() -> None:
    clock = Clock()
    work = WorkBudget(per_s=1000, burst=5000, clock=clock)
    clock.now += 3600  # an hour idle saves no more than the burst
    work.charge("a", 5000)
    assert work.owed_s("a") > 0


def test_it_remembers_a_bounded_number_of_agents_and_keeps_the_ones_in_debt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(work_module, "MAX_AGENTS", 10)
    clock = Clock()
    work = WorkBudget(per_s=1000, burst=5000, clock=clock)
    work.charge("debtor", 50_000)
    for i in range(30):
        work.charge(f"small-{i}", 1)
        clock.now += 1.0  # each small one is full again a moment later
    assert len(work.left) <= 10
    assert work.owed_s("debtor") > 0
