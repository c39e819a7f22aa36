"""The claim: the agent policy's spend holds, the idempotency key's claim, the call row
(with its sealed args) and the run's up-front budget charge — all or nothing, in ONE
statement on PostgreSQL (data-modifying CTEs), and as one short transaction of single
statements on SQLite, side by side below. Both answer a `Claimed`.

The key is claimed only when every hold fits; the call row and the charge only when the
key is won. A hold that fitted is given back when another did not, or when the key was
lost (rare: two requests of one key racing)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

from toolops import rows
from toolops.executor import claims
from toolops.executor.budget import Charge
from toolops.models import ToolCall
from toolops.policy import limits as spend
from toolops.policy.limits import Hold
from traces import services as traces

from .parts import ctes_run, savepoint_if_nested, vault_cte

CALL_TABLE = ToolCall._meta.db_table


@dataclass(frozen=True)
class Claimed:
    """What the claim did: `won` the key (and inserted the call); `reached`: the run's
    charge was applied and the run is now at a limit (True) or not (False), or it was
    not applied (None: no charge, or it did not fit); `over`: the indexes of the spend
    holds that did not fit under their limits (then nothing was written)."""

    won: bool
    reached: bool | None = None
    over: tuple[int, ...] = ()


def claim(
    call: ToolCall,
    *,
    lease_s: float,
    ttl_s: float,
    charge: Charge | None = None,
    holds: Sequence[Hold] = (),
) -> Claimed:
    """Claim the call's key and, only if won, insert the call row and apply `charge` (a
    conditional UPDATE of the run row, budget.Budget.upfront). Raises IntegrityError when
    the run already has a call with this tool_call_id (nothing is written then)."""
    agent_id = call.run.agent_id if holds else 0
    if not ctes_run():
        return _claim_in_transaction(call, lease_s, ttl_s, charge, holds, agent_id)
    sql, params = _claim_sql(call, lease_s, ttl_s, charge, holds, agent_id)
    with savepoint_if_nested(), connection.cursor() as cursor:
        cursor.execute(sql, params)
        call_pk, reached, *fitted = cursor.fetchone()
    if call_pk is None:
        # Not claimed: what was reserved is given back.
        spend.give_back(agent_id, [h.as_json() for h, ok in zip(holds, fitted, strict=True) if ok])
        return Claimed(False, over=tuple(i for i, ok in enumerate(fitted) if not ok))
    rows.mark_saved(call, call_pk)
    return Claimed(True, None if reached is None else bool(reached))


def _claim_sql(
    call: ToolCall,
    lease_s: float,
    ttl_s: float,
    charge: Charge | None,
    holds: Sequence[Hold],
    agent_id: int,
) -> tuple[str, list[Any]]:
    """PostgreSQL: `WITH r0…rn, claim, vault, charge, ins SELECT call id, reached, r0…rn`."""
    ctes: list[str] = []
    params: list[Any] = []
    for i, hold in enumerate(holds):
        sql, more = spend.reserve_sql(agent_id, hold)
        ctes.append(f"r{i} AS ({sql})")
        params += more
    reserved = " + ".join(f"(SELECT count(*) FROM r{i})" for i in range(len(holds)))
    sql, more = claims.claim_sql(
        key=call.idempotency_key,
        call_ref=call.call_id,
        tool=call.tool,
        lease_s=lease_s,
        ttl_s=ttl_s,
        only_if=f"{reserved} = {len(holds)}" if holds else "",
    )
    ctes.append(f"claim AS ({sql})")
    params += more
    vault, more = vault_cte([call], " WHERE EXISTS (SELECT 1 FROM claim)")
    if vault:
        ctes.append(vault)
        params += more
    if charge is not None:
        ctes.append(
            f"charge AS ({charge.update} AND EXISTS (SELECT 1 FROM claim) "
            f"RETURNING {charge.returning or 'NULL'} AS got)"
        )
        params += charge.params
    fields = rows.insert_fields(ToolCall)
    values, more = rows.values_sql([call], fields, typed=True)
    ctes.append(
        f"ins AS (INSERT INTO {CALL_TABLE} ({rows.columns(fields)}) "
        f"SELECT * FROM (VALUES {values}) AS v WHERE EXISTS (SELECT 1 FROM claim) RETURNING id)"
    )
    params += more
    reached = "(SELECT got FROM charge)" if charge is not None else "NULL"
    fitted = "".join(f", (SELECT count(*) FROM r{i})" for i in range(len(holds)))
    return f"WITH {', '.join(ctes)} SELECT (SELECT id FROM ins), {reached}{fitted}", params


def _claim_in_transaction(
    call: ToolCall,
    lease_s: float,
    ttl_s: float,
    charge: Charge | None,
    holds: Sequence[Hold],
    agent_id: int,
) -> Claimed:
    """SQLite: the same writes, one statement each, in one transaction rolled back whole
    when a hold does not fit or the key is taken."""
    claim_sql, claim_params = claims.claim_sql(
        key=call.idempotency_key,
        call_ref=call.call_id,
        tool=call.tool,
        lease_s=lease_s,
        ttl_s=ttl_s,
    )
    reached: bool | None = None
    try:
        with transaction.atomic():
            # Every hold or none (policy/limits.py), then the claim, in this transaction.
            over = spend.reserve_all(agent_id, holds) if holds else ()
            if over:
                raise _NotClaimed(over)
            with connection.cursor() as cursor:
                cursor.execute(claim_sql, claim_params)
                if cursor.fetchone() is None:
                    raise _NotClaimed(())
            rows.insert([call])
            traces.sealed_save(call)
            if charge is not None:
                with connection.cursor() as cursor:
                    cursor.execute(charge.sql(), charge.params)
                    row = cursor.fetchone() if charge.returning else None
                    reached = None if row is None else bool(row[0])
    except _NotClaimed as lost:
        return Claimed(False, over=lost.over)
    return Claimed(True, reached)


class _NotClaimed(Exception):
    """Rolls back a claim's transaction: a hold over its limit, or the key lost."""

    def __init__(self, over: tuple[int, ...]) -> None:
        self.over = over
