"""The invariants of a chaos run, checked on what is left once faults healed and the
stack went quiet: the history (tests/chaos/history.py) joined with the shop's ledger and
ToolOps' database, gathered into a `World` by tests/chaos/gather.py. Pure functions, so
that a world made by hand shows each check can fail (test_checker.py)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.chaos.history import INFO, INVOKE, OK, History, Op

Key = tuple[str, str]  # (run_id, tool_call_id)
SETTLED = {"discarded", "succeeded", "dead_lettered", "resolved"}
DECIDED_BY_TOOLOPS = {"succeeded", "failed", "skipped", "rejected", "degraded"}


@dataclass
class Call:
    run_id: str
    tool_call_id: str
    tool: str
    status: str
    attempts: int = 0
    attempt_rows: int = 0  # Attempt rows of this call's own tool (purpose "call")
    approval: str = ""  # approval status, "" when none
    approve_votes: int = 0
    reject_votes: int = 0
    decided_at: float | None = None
    compensation: str = ""  # compensation status, "" when none
    ticket: bool = False
    sent_at: list[float] = field(default_factory=list)  # requests that reached the shop


@dataclass
class Run:
    run_id: str
    status: str
    max_attempts: int | None
    attempts_used: int
    attempt_rows: int


@dataclass
class Effect:
    kind: str  # reservation, order, charge, notification
    effect_id: str
    key: Key | None  # the call it belongs to; None when no call claims it
    undone: bool = False


@dataclass
class World:
    history: History
    calls: dict[Key, Call] = field(default_factory=dict)
    runs: dict[str, Run] = field(default_factory=dict)
    effects: list[Effect] = field(default_factory=list)
    stale_claims: list[str] = field(default_factory=list)  # claims past lease + sweep
    max_attempts: dict[str, int] = field(default_factory=dict)  # per tool, from the catalog
    compensable: set[str] = field(default_factory=set)  # tools with a compensation
    with_query: set[str] = field(default_factory=set)  # tools whose unknowns a query settles
    texts: dict[str, str] = field(default_factory=dict)  # DB rows, logs, pages
    secrets: tuple[str, ...] = ()


@dataclass
class Violation:
    invariant: str
    message: str
    ops: list[Op] = field(default_factory=list)

    def text(self) -> str:
        lines = [f"VIOLATION of {self.invariant}: {self.message}"]
        lines += ["  " + op.line() for op in self.ops[-12:]]
        return "\n".join(lines)


def _ops(world: World, key: Key | str) -> list[Op]:
    name = "/".join(key) if isinstance(key, tuple) else key
    return world.history.by_key(name) or world.history.by_key(name.split("/")[0])


def single_effect(world: World) -> Violation | None:
    """At most one effect in the shop per call (per idempotency key), and none unclaimed."""
    seen: dict[Key, list[Effect]] = defaultdict(list)
    for effect in world.effects:
        if effect.key is None:
            return Violation(
                "single effect",
                f"{effect.kind} {effect.effect_id} in the shop belongs to no ToolOps call",
            )
        seen[effect.key].append(effect)
    for key, effects in seen.items():
        if len(effects) > 1:
            ids = ", ".join(e.effect_id for e in effects)
            return Violation(
                "single effect",
                f"call {'/'.join(key)} has {len(effects)} effects in the shop: {ids}",
                _ops(world, key),
            )
    return None


def effects_known(world: World) -> Violation | None:
    """An effect in the shop is a call ToolOps says succeeded (or one left unknown for a
    person): an effect it reported failed, rejected or skipped is lost to the agent."""
    for effect in world.effects:
        call = world.calls.get(effect.key) if effect.key else None
        if call is None:
            continue
        if call.status not in {"succeeded", "unknown"}:
            return Violation(
                "effects known",
                f"{effect.kind} {effect.effect_id} happened but "
                f"call {'/'.join(effect.key or ())} ended {call.status}",
                _ops(world, effect.key or ""),
            )
    return None


def claims_expire(world: World) -> Violation | None:
    """No claim outlives its lease plus one sweep; no call is left in progress."""
    if world.stale_claims:
        return Violation(
            "claims expire", f"claims held past lease + sweep: {', '.join(world.stale_claims[:5])}"
        )
    for key, call in world.calls.items():
        if call.status == "in_progress":
            return Violation(
                "claims expire", f"call {'/'.join(key)} still in_progress", _ops(world, key)
            )
    return None


def compensations_kept(world: World) -> Violation | None:
    """Every compensable success is kept (run completed), compensated, or dead-lettered
    with a ticket — never lost, never left open, and its undo shows in the shop."""
    undone = {e.key: e.undone for e in world.effects if e.key}
    for key, call in world.calls.items():
        if call.tool not in world.compensable or call.status != "succeeded":
            continue
        where = f"call {'/'.join(key)} ({call.tool}, run {world.runs[key[0]].status})"
        if call.compensation not in SETTLED:
            return Violation(
                "compensations kept",
                f"{where}: compensation {call.compensation or 'missing'}",
                _ops(world, key),
            )
        if call.compensation == "dead_lettered" and not call.ticket:
            return Violation("compensations kept", f"{where}: dead-lettered without a ticket")
        if call.compensation == "succeeded" and undone.get(key) is False:
            return Violation(
                "compensations kept",
                f"{where}: compensated, but the shop still holds its effect",
                _ops(world, key),
            )
        if call.compensation == "discarded" and undone.get(key):
            return Violation(
                "compensations kept", f"{where}: kept, but undone in the shop", _ops(world, key)
            )
    return None


def within_budget(world: World) -> Violation | None:
    """Attempts per call within the tool's max_attempts; per run within its budget."""
    for key, call in world.calls.items():
        limit = world.max_attempts.get(call.tool)
        used = max(call.attempts, call.attempt_rows)
        if limit is not None and used > limit:
            return Violation(
                "within budget",
                f"call {'/'.join(key)} ({call.tool}) made {used} attempts, over its {limit}",
                _ops(world, key),
            )
    for run in world.runs.values():
        used = max(run.attempts_used, run.attempt_rows)
        if run.max_attempts is not None and used > run.max_attempts:
            return Violation(
                "within budget",
                f"run {run.run_id} made {used} attempts, over its budget of {run.max_attempts}",
                _ops(world, run.run_id),
            )
    return None


def approved_once(world: World) -> Violation | None:
    """A call that needs approval reaches the downstream only after exactly one decision,
    an approval; never after a rejection or expiry."""
    for key, call in world.calls.items():
        if not call.approval or not call.sent_at:
            continue
        where = f"call {'/'.join(key)} ({call.tool}, approval {call.approval})"
        if call.approval != "approved" or call.reject_votes or call.approve_votes != 1:
            return Violation(
                "approved once",
                f"{where} reached the shop with "
                f"{call.approve_votes} approve and {call.reject_votes} reject "
                "votes",
                _ops(world, key),
            )
        if call.decided_at is None or min(call.sent_at) < call.decided_at:
            return Violation(
                "approved once", f"{where} reached the shop before its decision", _ops(world, key)
            )
    return None


def no_secrets(world: World) -> Violation | None:
    """No secret of the args in any stored row, log line or console page."""
    for source, text in world.texts.items():
        for secret in world.secrets:
            at = text.find(secret)
            if at >= 0:
                excerpt = text[max(0, at - 80) : at + len(secret) + 40].replace("\n", " ")
                return Violation("no secrets", f"{secret!r} in {source}: …{excerpt}…")
    return None


def info_resolved(world: World) -> Violation | None:
    """Every indeterminate operation is resolved: its key's last completion is ok or
    fail, and ToolOps has settled the call (an unknown only where no query can)."""
    last: dict[tuple[str, str], Op] = {}
    for op in world.history.ops:
        if op.type != INVOKE and op.f in {"run", "call", "complete", "abort", "decide"}:
            last[(op.f, op.key)] = op
    for (f, key), op in last.items():
        if op.type == INFO:
            return Violation(
                "info resolved", f"{f} {key} ended indeterminate", world.history.by_key(key)
            )
    for key, call in world.calls.items():
        if call.status == "unknown" and call.tool in world.with_query:
            return Violation(
                "info resolved",
                f"call {'/'.join(key)} ({call.tool}) still unknown though its query is healthy",
                _ops(world, key),
            )
        if call.status == "pending_approval" and world.runs[key[0]].status != "running":
            return Violation(
                "info resolved", f"call {'/'.join(key)} pending in an ended run", _ops(world, key)
            )
    return None


def answers_durable(world: World) -> Violation | None:
    """What ToolOps answered as decided is what it keeps: a call's last decided status in
    the history is its status in the database."""
    told: dict[str, str] = {}
    for op in world.history.ops:
        status = op.value.get("status") if op.type == OK and isinstance(op.value, dict) else None
        if op.f in {"call", "read"} and status in DECIDED_BY_TOOLOPS:
            told[op.key] = status
    for name, status in told.items():
        run_id, _, tc = name.rpartition("/")
        call = world.calls.get((run_id, tc))
        if call is not None and call.status != status:
            return Violation(
                "answers durable",
                f"call {name} was answered {status}, the database says {call.status}",
                world.history.by_key(name),
            )
    return None


INVARIANTS: list[Callable[[World], Violation | None]] = [
    single_effect,
    effects_known,
    claims_expire,
    compensations_kept,
    within_budget,
    approved_once,
    no_secrets,
    info_resolved,
    answers_durable,
]


def check(world: World) -> Violation | None:
    """The first violation, or None: every invariant held."""
    found = check_each(world)
    return found[0] if found else None


def check_each(world: World) -> list[Violation]:
    """Each broken invariant's first violation, in the order of INVARIANTS."""
    return [v for v in (invariant(world) for invariant in INVARIANTS) if v is not None]
