"""A run's budget on its row: the usage counters of a limited run, and the statements that
move them (DESIGN.md "budgets").

A write in a limited run must not take extra round trips for its budget. The first
attempt's reservation and the call's tokens ride in the claim statement (`upfront`),
applied only when both fit; what is left to count (retries, an attempt reserved but not
made), and the run's end when a limit is reached, ride in the record statement
(`settlement`) — only when there is such a thing, so a call that keeps to its first
attempt updates the run row once. Each is a conditional UPDATE of the run row, so
concurrent calls of one run still never overspend. Only when the up-front charge does
not fit (the budget is spent, a rare path) does the call go the long way, one statement
per question, to tell which limit it reached.

`Budget` is one call's share of all this: made with the call, handed to the claim, the
attempts and the record, each of which asks it (never sets it) what to count."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import F

from toolops.models import Run

TABLE = Run._meta.db_table
RUNNING, EXHAUSTED = Run.Status.RUNNING.value, Run.Status.BUDGET_EXHAUSTED.value
# Written out, not built by the ORM: compiling an UPDATE with expressions costs more CPU
# than the round trip it rides in. In SET, the columns are the row's values before it.
CHARGE_SQL = (
    f"UPDATE {TABLE} SET attempts_used = attempts_used + %s, tokens_used = tokens_used + %s, "
    f"status = CASE WHEN status = '{RUNNING}' AND ("
    "(max_attempts IS NOT NULL AND max_attempts <= attempts_used + %s) OR "
    f"(max_tokens IS NOT NULL AND max_tokens <= tokens_used + %s)) THEN '{EXHAUSTED}' "
    "ELSE status END WHERE id = %s"
)
UPFRONT_SQL = (
    f"UPDATE {TABLE} SET attempts_used = attempts_used + %s, tokens_used = tokens_used + %s "
    "WHERE id = %s"
)
# Whether the row, as updated, has reached a limit: the run must then end, by the record.
AT_LIMIT = (
    "(max_attempts IS NOT NULL AND attempts_used >= max_attempts) OR "
    "(max_tokens IS NOT NULL AND tokens_used >= max_tokens)"
)


@dataclass(frozen=True)
class Charge:
    """An UPDATE of the run row, kept in its parts so that a statement it rides in can
    add a condition (`AND EXISTS …`) and read `returning` back without taking SQL apart.
    `update` ends with its WHERE clause; `returning` is empty when nothing is read back."""

    update: str
    params: list[Any]
    returning: str = ""

    def sql(self) -> str:
        """The UPDATE alone, as its own statement."""
        return f"{self.update} RETURNING {self.returning}" if self.returning else self.update


def charge(run: Run, *, attempts: int, tokens: int) -> Charge:
    """Add usage and, in the same statement, end the run the moment a limit is reached."""
    return Charge(CHARGE_SQL, [attempts, tokens, attempts, tokens, run.pk])


def charge_run(run: Run, *, attempts: int, tokens: int) -> None:
    """Count usage on a limited run now, in a statement of its own."""
    if not run.has_limits:
        return
    with connection.cursor() as cursor:
        cursor.execute(CHARGE_SQL, [attempts, tokens, attempts, tokens, run.pk])


class Budget:
    """One call's share of its run's budget: its tokens, its attempts, and what the claim
    statement already counted. `counted=False` for the worker's compensation calls, which
    are outside the run's budget (an exhausted run must still be undone)."""

    def __init__(self, run: Run, tokens: int = 0, *, counted: bool = True) -> None:
        self.run = run
        self.counted = counted
        self.tokens = tokens  # not yet counted on the run row
        self.attempts = 0  # made, and not yet counted on the run row
        # The first attempt was reserved by the claim statement; given back at the
        # record if it was never made.
        self.first_reserved = False
        # Whether the record must settle the run's usage: a limit was reached, or an
        # attempt was reserved outside the claim (None: not known, settle).
        self.limit_reached: bool | None = None

    def upfront(self) -> Charge | None:
        """The first attempt's reservation (against max_attempts) and the call's tokens
        (against max_tokens), as one UPDATE that changes the row only when both fit and
        RETURNs whether a limit is now reached; None for a run without limits (its usage
        is summed from its calls), and for tokens that could never fit (the long way,
        `charge_tokens_now`, says so)."""
        run, tokens = self.run, self.tokens
        if not run.has_limits or (run.max_tokens is not None and tokens > run.max_tokens):
            return None
        update = UPFRONT_SQL
        params: list[Any] = [1, tokens, run.pk]
        if run.max_attempts is not None:
            update += " AND attempts_used < %s"
            params.append(run.max_attempts)
        if run.max_tokens is not None and tokens:
            update += " AND tokens_used <= %s"
            params.append(run.max_tokens - tokens)
        return Charge(update, params, returning=AT_LIMIT)

    def claimed(self, reached: bool) -> None:
        """The claim statement applied `upfront`: the tokens and the first attempt are
        counted; `reached`: the run is now at a limit."""
        self.tokens = 0
        self.first_reserved = True
        self.limit_reached = reached

    def charge_tokens_now(self) -> bool:
        """Count the tokens before executing, against a token limit; True when they take
        the run past it (the call is counted, but not executed)."""
        run = self.run
        if not self.tokens or run.max_tokens is None:
            return False
        Run.objects.filter(pk=run.pk).update(tokens_used=F("tokens_used") + self.tokens)
        run.refresh_from_db(fields=["tokens_used", "attempts_used", "status"])
        self.tokens = 0
        return run.tokens_used > run.max_tokens

    def reserve_attempt(self) -> bool:
        """May one more attempt go out? The executor never starts an attempt that would go
        past max_attempts: it is reserved first, atomically, against every other call of
        the run (the first one by the claim already)."""
        run = self.run
        if self.first_reserved:
            self.first_reserved = False
            return True
        if run.max_attempts is None or not self.counted:
            self.attempts += 1
            return True
        self.limit_reached = None  # reserved here: the record settles the run's usage
        reserved = Run.objects.filter(pk=run.pk, attempts_used__lt=run.max_attempts).update(
            attempts_used=F("attempts_used") + 1
        )
        return reserved == 1

    def settlement(self) -> Charge | None:
        """What the record statement must still count on the run row: attempts and tokens
        not counted yet, less a first attempt reserved but never made, and the run's end
        when a limit is reached. None when there is nothing to settle."""
        if not self.counted or not self.run.has_limits:
            return None
        attempts = self.attempts - (1 if self.first_reserved else 0)
        if not attempts and not self.tokens and self.limit_reached is False:
            return None
        return charge(self.run, attempts=attempts, tokens=self.tokens)
