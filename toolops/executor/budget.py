"""A run's budget on its row: the usage counters of a limited run, and the statements that
move them (DESIGN.md "budgets").

A write in a limited run must not take extra round trips for its budget. The first
attempt's reservation and the call's tokens ride in the claim statement (`upfront`),
applied only when both fit; what is left to count (retries, an attempt reserved but not
made), and the run's end when a limit is reached, ride in the record statement
(`charge_sql`) — only when there is such a thing, so a call that keeps to its first
attempt updates the run row once. Each is a conditional
UPDATE of the run row, so concurrent calls of one run still never overspend. Only when
the up-front charge does not fit (the budget is spent, a rare path) does the call go
the long way, one statement per question, to tell which limit it reached."""

from __future__ import annotations

from django.db import connection
from django.db.models import F

from toolops.models import Run

Sql = tuple[str, list[object]]


class Tokens:
    """A call's tokens count once, when the call is accepted. Against a run with a token
    limit they are counted up front (the limit decides whether the call runs); otherwise
    they ride along with the call's final write."""

    def __init__(self, run: Run, tokens: int) -> None:
        self.run = run
        self.tokens = tokens
        self.pending = tokens

    def charge_now(self) -> bool:
        """Count the tokens before executing, against a token limit; True when they take
        the run past it (the call is counted, but not executed)."""
        run = self.run
        if not self.pending or run.max_tokens is None:
            return False
        Run.objects.filter(pk=run.pk).update(tokens_used=F("tokens_used") + self.pending)
        run.refresh_from_db(fields=["tokens_used", "attempts_used", "status"])
        self.pending = 0
        return run.tokens_used > run.max_tokens


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


def charge_sql(run: Run, *, attempts: int, tokens: int) -> Sql:
    """Add usage and, in the same statement, end the run the moment a limit is reached."""
    return CHARGE_SQL, [attempts, tokens, attempts, tokens, run.pk]


def charge_run(run: Run, *, attempts: int, tokens: int) -> None:
    if not run.has_limits:
        return
    sql, params = charge_sql(run, attempts=attempts, tokens=tokens)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


# Whether the row, as updated, has reached a limit: the run must then end, by the record.
AT_LIMIT = (
    "(max_attempts IS NOT NULL AND attempts_used >= max_attempts) OR "
    "(max_tokens IS NOT NULL AND tokens_used >= max_tokens)"
)


def upfront(run: Run, *, tokens: int) -> Sql | None:
    """The first attempt's reservation (against max_attempts) and the call's tokens
    (against max_tokens), as one UPDATE that changes the row only when both fit and
    RETURNs whether a limit is now reached; None for a run without limits (its usage is
    summed from its calls), and for tokens that could never fit (the long way says so)."""
    if not run.has_limits or (run.max_tokens is not None and tokens > run.max_tokens):
        return None
    sql = UPFRONT_SQL
    params: list[object] = [1, tokens, run.pk]
    if run.max_attempts is not None:
        sql += " AND attempts_used < %s"
        params.append(run.max_attempts)
    if run.max_tokens is not None and tokens:
        sql += " AND tokens_used <= %s"
        params.append(run.max_tokens - tokens)
    return f"{sql} RETURNING {AT_LIMIT}", params
