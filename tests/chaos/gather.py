"""What the checker judges, gathered once the stack is quiet: ToolOps' database (through
the Django ORM of the runner's process, straight to the database), the shop's ledger and
request log, the processes' logs and a few console pages, into a checker.World."""

from __future__ import annotations

import re
import tomllib
from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.chaos.checker import Call, Effect, Key, Run, World
from tests.chaos.history import History
from tests.chaos.stack import CLAIM_SWEEP_S, TIMINGS, Stack
from tests.chaos.workload import SECRETS, Reviewer

NOTE_RUN = re.compile(r"Run (\S+):")
# Slack past lease + sweep: a beat that was itself killed, a worker busy for a moment.
CLAIM_SLACK_S = 30.0


def catalog(path: Path) -> tuple[dict[str, int], set[str], set[str]]:
    tools = tomllib.loads(path.read_text())["tool"]
    limits = {t["name"]: int(t.get("max_attempts", 3)) for t in tools}
    return (
        limits,
        {t["name"] for t in tools if "compensation" in t},
        {t["name"] for t in tools if "query" in t},
    )


def gather(stack: Stack, history: History, reviewer: Reviewer) -> World:
    limits, compensable, with_query = catalog(stack.workdir / "catalog.toml")
    requests = stack.shop.logged_requests(None)
    world = World(
        history,
        max_attempts=limits,
        compensable=compensable,
        with_query=with_query,
        secrets=SECRETS,
    )
    world.runs = runs()
    world.calls = calls(requests, set(world.runs))
    world.effects = effects(stack, requests)
    world.stale_claims = stale_claims()
    world.texts = {
        **db_texts(),
        **{f"log {n}": t for n, t in stack.logs().items()},
        **pages(reviewer, world),
    }
    return world


def runs() -> dict[str, Run]:
    from django.db.models import Count, Q

    from toolops.models import Run as RunRow

    rows = RunRow.objects.annotate(rows=Count("calls__attempt_rows", filter=Q(calls__role="call")))
    return {
        r.run_id: Run(r.run_id, r.status, r.max_attempts, r.attempts_used, r.rows) for r in rows
    }


def calls(requests: list[dict[str, Any]], run_ids: set[str]) -> dict[Key, Call]:
    from toolops.models import ToolCall

    sent: dict[Key, list[float]] = {}
    for r in requests:
        headers = r.get("headers") or {}
        tc = headers.get("x-toolops-tool-call-id")
        if tc and not r["path"].endswith(("/lookup", "/release", "/cancel", "/refunds")):
            sent.setdefault((headers.get("x-toolops-run-id") or "", tc), []).append(r["at"])
    found: dict[Key, Call] = {}
    rows = ToolCall.objects.filter(role="call").select_related("run", "approval")
    for row in rows.prefetch_related("attempt_rows"):
        key = (row.run.run_id, row.tool_call_id)
        found[key] = call(row, sent.get(key, []))
    return found


def call(row: Any, sent_at: list[float]) -> Call:
    own = [a for a in row.attempt_rows.all() if a.purpose == "call" and a.tool in ("", row.tool)]
    result = Call(
        row.run.run_id,
        row.tool_call_id,
        row.tool,
        row.status,
        row.attempts,
        len(own),
        sent_at=sent_at,
    )
    approval = row.approval
    if approval is not None:
        votes = list(approval.votes.values_list("decision", flat=True))
        result.approval = approval.status
        result.approve_votes, result.reject_votes = votes.count("approve"), votes.count("reject")
        result.decided_at = approval.decided_at.timestamp() if approval.decided_at else None
    comp = getattr(row, "compensation", None)
    if comp is not None:
        result.compensation = comp.status
        result.ticket = hasattr(comp, "ticket")
    return result


def effects(stack: Stack, requests: list[dict[str, Any]]) -> list[Effect]:
    """The shop's rows, each joined to the call that made it: a reservation by the
    Idempotency-Key it was saved under, an order or a charge by its client_reference,
    a notification by the run its message names."""
    by_key: dict[str, Key] = {}
    for r in requests:
        headers, body = r.get("headers") or {}, r.get("body")
        owner = (headers.get("x-toolops-run-id") or "", headers.get("x-toolops-tool-call-id") or "")
        if headers.get("idempotency-key"):
            by_key[headers["idempotency-key"]] = owner
        if isinstance(body, dict) and body.get("client_reference"):
            by_key[f"ref:{body['client_reference']}"] = owner
    with stack.shop.db.lock:
        conn = stack.shop.db._conn
        keys = {
            row["body"]: row["key"]
            for row in conn.execute(
                "SELECT key, body FROM idempotency_keys WHERE path = '/inventory/reservations'"
            )
        }
        state = stack.shop.db.snapshot()
    found = []
    for res in state["reservations"]:
        key = next((k for body, k in keys.items() if res["reservation_id"] in body), None)
        found.append(
            Effect(
                "reservation",
                res["reservation_id"],
                by_key.get(key or ""),
                res["status"] == "released",
            )
        )
    for kind, table, undone in (
        ("order", "orders", "cancelled"),
        ("charge", "charges", "refunded"),
    ):
        for row in state[table]:
            owner = by_key.get(f"ref:{row['client_reference']}")
            found.append(Effect(kind, row[f"{kind}_id"], owner, row["status"] == undone))
    for row in state["notifications"]:
        named = NOTE_RUN.search(row["message"])
        found.append(
            Effect(
                "notification", row["notification_id"], (named.group(1), "tc-1") if named else None
            )
        )
    return found


def stale_claims() -> list[str]:
    from django.utils import timezone

    from toolops.models import IdempotencyRecord

    lease = float(TIMINGS["TOOLOPS_CLAIM_LEASE_S"])
    cutoff = timezone.now() - timedelta(seconds=CLAIM_SWEEP_S + CLAIM_SLACK_S)
    stale = IdempotencyRecord.objects.filter(state="claimed", lease_until__lt=cutoff)
    return [f"{r.tool} {r.call_ref} (lease {lease:g} s)" for r in stale]


def db_texts() -> dict[str, str]:
    """Every row of every table of ToolOps' database that holds a secret, as text."""
    from django.db import connection

    found: dict[str, str] = {}
    with connection.cursor() as cur:
        cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        for (table,) in cur.fetchall():
            for secret in SECRETS:
                cur.execute(
                    f'SELECT t::text FROM "{table}" t WHERE t::text LIKE %s LIMIT 1',
                    [f"%{secret}%"],
                )
                row = cur.fetchone()
                if row:
                    found[f"table {table}"] = row[0]
    return found


def pages(reviewer: Reviewer, world: World) -> dict[str, str]:
    """A few console pages a person opens: the home, the runs list, notification calls'
    pages."""
    from toolops.models import ToolCall

    paths = ["/console/", "/console/runs/", "/console/approvals/", "/console/tickets/"]
    paths += ["/console/unknown/"]
    notes = ToolCall.objects.filter(tool="send_notification").select_related("run")[:5]
    paths += [f"/console/calls/{c.call_id}/" for c in notes]
    paths += [f"/console/runs/{c.run_id}/" for c in notes]
    found = {}
    for path in paths:
        try:
            response = reviewer.http.get(reviewer.url(path), follow_redirects=True)
        except Exception as exc:  # noqa: BLE001 - a page that cannot be read is named
            found[f"page {path}"] = f"unreadable: {exc}"
            continue
        found[f"page {path} ({response.status_code})"] = response.text
    return found
