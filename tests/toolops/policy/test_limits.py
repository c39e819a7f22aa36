"""Spend limits over a call's life (API.md "Agent policy"), through the API against the
demo shop: a call that ends not done gives its reservation back, an unknown one keeps it
until it is settled, a held one is decided by a reviewer, and a day turns over at
midnight in the limit's own time zone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.toolops.api.helpers import create_run
from tests.toolops.policy.flow import CHARGES_RUN, call, decide, money, reviewer, units
from tests.toolops.policy.helpers import apply_policy
from toolops.executor.settle import call_reconcile, call_settle
from toolops.models import Approval, ToolCall, ToolPolicy
from toolops.policy import limits, wording
from toolops.policy.document import Limit

pytestmark = pytest.mark.django_db

BERLIN = ZoneInfo("Europe/Berlin")
CHARGE_LIMIT = """
[[limit]]
name = "charges per day"
agents = ["*"]
tools = ["charge"]
sum = "amount"
max = "100.00"
per = "day"
on_exceed = "{on_exceed}"
"""


@pytest.fixture
def run(api: APIClient, shop: Shop) -> dict[str, Any]:
    return create_run(api, "r-1")


def charge_limit(*, on_exceed: str = "refuse", runs: bool = True) -> None:
    """At most 100.00 of charges a day per agent; `runs`: charges need no reviewer."""
    apply_policy(CHARGE_LIMIT.format(on_exceed=on_exceed) + (CHARGES_RUN if runs else ""))


def reservations_limit(max_calls: int = 1, time_zone: str = "UTC") -> None:
    apply_policy(
        f"""
        [[limit]]
        name = "reservations per day"
        agents = ["*"]
        tools = ["reserve_stock"]
        max = {max_calls}
        per = "day"
        time_zone = "{time_zone}"
        """
    )


def test_it_frees_the_reservation_of_a_call_that_failed(
    api: APIClient, run: Any, shop: Shop
) -> None:
    reservations_limit(max_calls=1)
    # The inventory service refuses the reservation outright: a fatal 4xx, not done.
    shop.fault("/inventory/reservations", fail_next=1, fail_status=400)

    failed = call(api, 0, "reserve_stock", sku="A12", qty=1)

    assert failed["status"] == "failed" and failed["error"]["reason"] != "spend_limit", failed
    assert units("reservations per day") == 0
    passed = call(api, 1, "reserve_stock", sku="A12", qty=1)
    assert passed["status"] == "succeeded", passed
    assert units("reservations per day") == 1
    over = call(api, 2, "reserve_stock", sku="A12", qty=1)
    assert over["error"]["reason"] == "spend_limit", over
    assert len(shop.requests("/inventory/reservations")) == 2


def test_it_frees_the_reservation_of_a_held_call_a_reviewer_rejects(
    api: APIClient, run: Any, shop: Shop
) -> None:
    charge_limit(runs=False)  # charge waits for a reviewer, as the catalog says
    held = call(api, 0, "charge", order_id="o-1", amount="80.00")
    assert held["status"] == "pending_approval", held
    assert held["approval"]["reason"] == "irreversible"
    # Reserved while it waits.
    assert units("charges per day") == money("80.00")

    decide(held["call_id"], reviewer("rita"), approve=False, note="The customer cancelled.")

    assert ToolCall.objects.get(call_id=held["call_id"]).status == "rejected"
    assert units("charges per day") == 0
    # The room it took is free again: 100.00 fits under the max.
    again = call(api, 1, "charge", order_id="o-2", amount="100.00")
    assert again["status"] == "pending_approval", again
    assert units("charges per day") == money("100.00")
    assert shop.requests("/payments/charges") == []


@pytest.mark.django_db(transaction=True)  # a dangling row would show only at its commit
def test_it_refuses_a_call_needing_approval_over_a_limit_while_another_is_held(
    api: APIClient, run: Any, shop: Shop
) -> None:
    charge_limit(runs=False)
    assert call(api, 0, "charge", order_id="o-1", amount="80.00")["status"] == "pending_approval"

    over = call(api, 1, "charge", order_id="o-2", amount="30.00")

    assert over["status"] == "failed" and over["error"]["reason"] == "spend_limit", over
    assert over["approval"] is None
    assert "80.00 spent" in over["feedback"]
    assert Approval.objects.count() == 1
    assert units("charges per day") == money("80.00")


def test_it_holds_a_call_over_an_approve_limit_and_a_rejection_frees_it(
    api: APIClient, run: Any, shop: Shop
) -> None:
    version = apply_policy(CHARGE_LIMIT.format(on_exceed="approve") + CHARGES_RUN)
    assert call(api, 0, "charge", order_id="o-1", amount="80.00")["status"] == "succeeded"

    over = call(api, 1, "charge", order_id="o-2", amount="30.00")

    assert over["status"] == "pending_approval", over
    assert over["approval"]["reason"] == "policy"
    assert over["approval"]["rule"] == "charges per day"
    assert over["approval"]["policy_version"] == version.number
    assert "charges per day" in over["policy"]["rules"]
    assert "'charges per day'" in over["feedback"] and "80.00 spent" in over["feedback"]
    assert "waits for a reviewer" in over["feedback"], over["feedback"]
    assert Approval.objects.get().rule == "charges per day"
    # Let past the limit by a reviewer, if one approves: reserved beyond max meanwhile.
    assert units("charges per day") == money("110.00")
    decide(over["call_id"], reviewer("rita"), approve=False, note="Over the day's budget.")
    assert units("charges per day") == money("80.00")
    assert call(api, 2, "charge", order_id="o-3", amount="20.00")["status"] == "succeeded"
    assert len(shop.requests("/payments/charges")) == 2


def unknown_charge(api: APIClient, shop: Shop) -> dict[str, Any]:
    """A charge of 60.00 whose answer is lost while its query fails too: left unknown."""
    charge_limit()
    ToolPolicy.objects.create(tool="charge", timeout_s=0.5)
    shop.fault("/payments/charges", timeout_next=1, hang_s=1)
    shop.fault("/payments/charges/lookup", fail_next=10_000, fail_status=500)
    unknown = call(api, 0, "charge", order_id="o-1", amount="60.00")
    assert unknown["status"] == "unknown", unknown
    return unknown


@pytest.mark.parametrize(
    ("succeeded", "left"), [(False, "0.00"), (True, "60.00")], ids=["failed", "succeeded"]
)
def test_it_keeps_an_unknown_calls_reservation_until_it_is_settled(
    api: APIClient, run: Any, shop: Shop, succeeded: bool, left: str
) -> None:
    unknown = unknown_charge(api, shop)
    assert units("charges per day") == money("60.00")
    # It may have been charged: its amount still counts.
    over = call(api, 1, "charge", order_id="o-2", amount="50.00")
    assert over["error"]["reason"] == "spend_limit", over

    row = ToolCall.objects.select_related("run").get(call_id=unknown["call_id"])
    assert call_settle(
        call=row, by=reviewer("rita"), succeeded=succeeded, note="checked the ledger"
    )

    assert units("charges per day") == money(left)
    after = call(api, 2, "charge", order_id="o-2", amount="50.00")
    assert after["status"] == ("failed" if succeeded else "succeeded"), after
    if succeeded:
        assert after["error"]["reason"] == "spend_limit"
    assert ToolCall.objects.get(call_id=unknown["call_id"]).status == (
        "succeeded" if succeeded else "failed"
    )


def test_it_starts_a_new_day_at_midnight_in_the_limits_time_zone(
    api: APIClient, run: Any, shop: Shop, monkeypatch: pytest.MonkeyPatch
) -> None:
    reservations_limit(max_calls=1, time_zone="Europe/Berlin")
    # 23:59:30 in Berlin is 21:59:30 UTC, and 00:00:30 the next day still 22:00:30 UTC
    # of the same UTC day: only the limit's own zone turns the day over.
    before = datetime(2026, 7, 14, 23, 59, 30, tzinfo=BERLIN)
    after = datetime(2026, 7, 15, 0, 0, 30, tzinfo=BERLIN)
    monkeypatch.setattr(limits, "clock", lambda: before)
    assert call(api, 0, "reserve_stock", sku="A12", qty=1)["status"] == "succeeded"

    over = call(api, 1, "reserve_stock", sku="A12", qty=1)

    assert over["error"]["reason"] == "spend_limit", over
    assert "1 call" in over["feedback"]
    assert "it resets at 00:00 Europe/Berlin" in over["feedback"], over["feedback"]
    monkeypatch.setattr(limits, "clock", lambda: after)
    passed = call(api, 2, "reserve_stock", sku="A12", qty=1)
    assert passed["status"] == "succeeded", passed
    assert units("reservations per day", "2026-07-14") == 1
    assert units("reservations per day", "2026-07-15") == 1
    assert len(shop.requests("/inventory/reservations")) == 2


def test_it_counts_calls_of_a_read_tool_and_refuses_past_max(
    api: APIClient, run: Any, shop: Shop
) -> None:
    version = apply_policy(
        """
        [[limit]]
        name = "stock looks"
        agents = ["agent-a"]
        tools = ["query_stock"]
        max = 2
        per = "total"
        """
    )
    for step in (0, 1):
        assert call(api, step, "query_stock", sku="A12")["status"] == "succeeded"

    over = call(api, 2, "query_stock", sku="A12")

    assert over["status"] == "failed" and over["error"]["reason"] == "spend_limit", over
    assert over["error"]["class"] == "fatal"
    assert over["policy"] == {"version": version.number, "rules": ["stock looks"]}
    assert "it never resets" in over["feedback"]
    assert len(shop.requests("/inventory/stock")) == 2
    assert units("stock looks") == 2


# -- periods: keys and when the next begins -------------------------------------------


def limit_per(per: str, time_zone: str = "Europe/Berlin") -> Limit:
    return Limit(
        name="l",
        agents=("*",),
        tools=("*",),
        sum=None,
        max=Decimal(5),
        per=per,
        time_zone=time_zone,
    )


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


@pytest.mark.parametrize(
    ("per", "now", "key", "resets_at"),
    [
        # 00:30 in Berlin on the 15th is still the 14th in UTC.
        ("day", utc(2026, 7, 14, 22, 30), "2026-07-15", utc(2026, 7, 15, 22)),
        # ISO weeks: 2026 has 53; its last runs into January, up to Sunday 23:59 in Berlin.
        ("week", utc(2026, 12, 31, 12), "2026-W53", utc(2027, 1, 3, 23)),
        ("week", utc(2027, 1, 1, 12), "2026-W53", utc(2027, 1, 3, 23)),
        ("week", utc(2027, 1, 3, 22, 59, 59), "2026-W53", utc(2027, 1, 3, 23)),
        ("week", utc(2027, 1, 3, 23), "2027-W01", utc(2027, 1, 10, 23)),
        # December into January, at midnight in Berlin (23:00 UTC in winter).
        ("month", utc(2026, 12, 31, 22, 59, 59), "2026-12", utc(2026, 12, 31, 23)),
        ("month", utc(2026, 12, 31, 23), "2027-01", utc(2027, 1, 31, 23)),
        # The next month begins in summer time: 22:00 UTC.
        ("month", utc(2026, 3, 15, 12), "2026-03", utc(2026, 3, 31, 22)),
        ("total", utc(2026, 3, 15, 12), "total", None),
    ],
)
def test_it_keys_a_period_and_says_when_the_next_begins(
    per: str, now: datetime, key: str, resets_at: datetime | None
) -> None:
    found = limits.period(limit_per(per), now)

    assert (found.key, found.resets_at) == (key, resets_at)


def test_it_turns_a_utc_month_over_on_the_first() -> None:
    found = limits.period(limit_per("month", "UTC"), utc(2026, 12, 1, 0, 0, 0))

    assert (found.key, found.resets_at) == ("2026-12", utc(2027, 1, 1))
    assert limits.period(limit_per("month", "UTC"), utc(2026, 11, 30, 23, 59, 59)).key == "2026-11"


def test_it_says_when_each_period_resets_in_the_limits_zone() -> None:
    assert wording.resets(limit_per("day"), utc(2026, 7, 15, 22)) == (
        "it resets at 00:00 Europe/Berlin"
    )
    assert wording.resets(limit_per("week"), utc(2027, 1, 3, 23)) == (
        "it resets on Monday at 00:00 Europe/Berlin"
    )
    assert wording.resets(limit_per("month"), utc(2026, 12, 31, 23)) == (
        "it resets on 1 January at 00:00 Europe/Berlin"
    )
    assert wording.resets(limit_per("total"), None) == "it never resets"


def test_an_unknown_call_the_worker_finds_never_happened_gives_its_reservation_back(
    api: APIClient, run: Any, shop: Shop
) -> None:
    unknown = unknown_charge(api, shop)
    assert units("charges per day") == money("60.00")
    # The lookup answers again: the charge hung without effect, so it finds nothing.
    shop.fault("/payments/charges/lookup", fail_next=0)
    row = ToolCall.objects.get(call_id=unknown["call_id"])
    ToolCall.objects.filter(pk=row.pk).update(
        next_reconcile_at=timezone.now() - timedelta(seconds=1)
    )

    assert call_reconcile(call_pk=row.pk) == "failed"

    assert units("charges per day") == money("0.00")
    assert call(api, 1, "charge", order_id="o-2", amount="90.00")["status"] == "succeeded"
