"""Spend limits (API.md "Agent policy"): calendar periods in a time zone, and the counter
rows that hold them under races.

A call a limit covers reserves its amount (or one call) when it is admitted: a
conditional upsert of its counter row — `spent + amount <= max`, checked by the database
on the row it locks — taken by the same statement that claims the call
(executor/statements/claim.py). Calls racing on any number of processes queue on that row, and
never pass max. A call that ends not done (`failed`, `rejected`, `skipped`) gives its
amount back (`free`); one that ends `unknown` keeps it until it is settled; a
compensated call stays counted. Amounts are kept in units: one per call for a count,
ten-thousandths for a sum, so both databases add exactly.

Periods are read on the process clock through `clock` (tests replace it): a period
turns over at midnight (or Monday, or the 1st) in the limit's time zone."""

from __future__ import annotations

import zoneinfo
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from .document import Limit
from .models import SpendCounter

SCALE = Decimal(10000)
# No single call reserves more than this many units (a sum past it is over any max).
MAX_UNITS = 2**53
TABLE = SpendCounter._meta.db_table
Sql = tuple[str, list[int | str | None]]


def clock() -> datetime:
    return timezone.now()


@dataclass(frozen=True)
class Period:
    key: str
    resets_at: datetime | None


def period(limit: Limit, now: datetime | None = None) -> Period:
    """The limit's current period, and when the next begins (None for `total`)."""
    if limit.per == "total":
        return Period("total", None)
    zone = zoneinfo.ZoneInfo(limit.time_zone)
    local = (now or clock()).astimezone(zone)
    today = local.date()
    if limit.per == "day":
        start, key = today, today.isoformat()
        following = start + timedelta(days=1)
    elif limit.per == "week":
        start = today - timedelta(days=today.weekday())
        year, week, _ = today.isocalendar()
        key, following = f"{year}-W{week:02d}", start + timedelta(days=7)
    else:
        key = f"{today.year}-{today.month:02d}"
        following = date(today.year + (today.month == 12), today.month % 12 + 1, 1)
    resets = datetime.combine(following, time(), tzinfo=zone).astimezone(zoneinfo.ZoneInfo("UTC"))
    return Period(key, resets)


def units(limit: Limit, amount: Decimal) -> int:
    """An amount in the counter's units (rounded up: a limit never undercounts)."""
    if limit.counts:
        return 1
    scaled = (amount * SCALE).to_integral_value(rounding=ROUND_CEILING)
    return int(min(max(scaled, Decimal(0)), Decimal(MAX_UNITS)))


def cap_units(limit: Limit) -> int:
    return int(limit.max if limit.counts else limit.max * SCALE)


def shown(limit: Limit, value: int) -> int | str:
    """Units as API.md says them: an integer for a count, a decimal string for a sum."""
    if limit.counts:
        return value
    amount = Decimal(value) / SCALE
    cents = amount.quantize(Decimal("0.01"))
    return f"{cents:f}" if cents == amount else f"{amount.normalize():f}"


def amount_of(limit: Limit, args: Mapping[str, Any]) -> Decimal:
    """What a call adds to a sum limit: its `sum` field (absent: nothing)."""
    if limit.sum is None:
        return Decimal(1)
    value = args.get(limit.sum)
    if value is None or isinstance(value, bool):
        return Decimal(0)
    try:
        return Decimal(str(value))
    except InvalidOperation:
        return Decimal(0)


def currency_of(schema: Mapping[str, Any], args: Mapping[str, Any], limit: Limit) -> str:
    """One counter per currency where the tool has a `currency` field: a sum of euros
    and a sum of dollars are two limits of the same max."""
    if limit.sum is None or "currency" not in (schema.get("properties") or {}):
        return ""
    value = args.get("currency")
    return value.strip().upper()[:16] if isinstance(value, str) else ""


@dataclass(frozen=True)
class Hold:
    """One reservation of one call: which counter row, and how many units."""

    limit: str
    period: str
    currency: str
    units: int
    # The max it is checked against, in units; None: reserved past it (a reviewer's leave).
    cap: int | None

    def as_json(self) -> list[str | int]:
        return [self.limit, self.period, self.currency, self.units]


def reserve_sql(agent_id: int, hold: Hold) -> Sql:
    """One counter's reservation, RETURNING a row only if it fit under its cap."""
    now = "statement_timestamp()" if connection.vendor == "postgresql" else "CURRENT_TIMESTAMP"
    cap = "CAST(%s AS bigint)" if connection.vendor == "postgresql" else "%s"
    sql = (
        f'INSERT INTO {TABLE} (agent_id, "limit", period, currency, spent, cap, updated_at) '
        f"SELECT %s, %s, %s, %s, %s, {cap}, {now} WHERE {cap} IS NULL OR %s <= {cap} "
        f'ON CONFLICT (agent_id, "limit", period, currency) DO UPDATE SET '
        f"spent = {TABLE}.spent + EXCLUDED.spent, cap = EXCLUDED.cap, "
        "updated_at = EXCLUDED.updated_at "
        f"WHERE EXCLUDED.cap IS NULL OR {TABLE}.spent + EXCLUDED.spent <= EXCLUDED.cap "
        "RETURNING 1"
    )
    params: list[int | str | None] = [
        agent_id,
        hold.limit,
        hold.period,
        hold.currency,
        hold.units,
        hold.cap,
        hold.cap,
        hold.units,
        hold.cap,
    ]
    return sql, params


def give_back(agent_id: int, holds: Sequence[Sequence[str | int]]) -> None:
    """Return reserved units (a call that ended not done, or one whose claim was lost)."""
    if not holds:
        return
    with connection.cursor() as cursor:
        for limit, period_key, currency, amount in holds:
            cursor.execute(
                f"UPDATE {TABLE} SET spent = CASE WHEN spent > %s THEN spent - %s ELSE 0 END "
                f'WHERE agent_id = %s AND "limit" = %s AND period = %s AND currency = %s',
                [amount, amount, agent_id, limit, period_key, currency],
            )


def spent(agent_id: int, limit: Limit, period_key: str) -> dict[str, int]:
    """The agent's units under the limit this period, per currency ("" when none)."""
    rows = SpendCounter.objects.filter(agent_id=agent_id, limit=limit.name, period=period_key)
    return {row.currency: row.spent for row in rows}


class _Over(Exception):
    def __init__(self, over: tuple[int, ...]) -> None:
        self.over = over


def reserve_all(agent_id: int, holds: Sequence[Hold]) -> tuple[int, ...]:
    """Reserve every hold or none, in one transaction (a call that takes no claim). The
    indexes of the holds that did not fit."""
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                fitted = []
                for hold in holds:
                    cursor.execute(*reserve_sql(agent_id, hold))
                    fitted.append(cursor.fetchone() is not None)
            if not all(fitted):
                raise _Over(tuple(i for i, ok in enumerate(fitted) if not ok))
    except _Over as over:
        return over.over
    return ()
