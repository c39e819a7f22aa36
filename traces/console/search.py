"""The console search (`/console/search/?q=`): a run found by what a person has at hand.

In this order, each kind of match listed apart, the most recent runs first:
1. an exact id: a run's run_id or trace_id, a call's tool_call_id, call_id or idempotency
   key (API.md: one run found so → its page), an approval's id (→ the approval's page
   for a reviewer, else its call);
2. a value a catalog tool marks `searchable` (an order id, a charge id, a customer's
   e-mail), by the HMAC of the query in the search index (traces/search.py): nothing is
   compared in plain;
3. part of a run_id: runs whose id starts with the query, then those that contain it
   (a B-tree in pattern order and a trigram index on PostgreSQL, migration traces 0006; a
   scan on SQLite).
An id that many runs share (every run has a "tc-1") is one line — "tool_call_id tc-1
appears in 37 runs" — with the most recent of them, never a redirect to one of them."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from django.db.models import CharField, Count, F, Func, Q, QuerySet

from toolops.models import Run, ToolCall
from toolops.tools.facts import label
from traces.models import SearchKey
from traces.search import digest, is_email, normalized
from traces.sensitive import SENSITIVE_KEY

LIMIT = 50  # runs listed per kind of match; more are counted, or noted
MAX_QUERY = 256  # as the index: longer values are not indexed (traces/search.py)
MIN_PART = 3  # shorter parts of a run id would match most runs, and no trigram
KEY_RE = re.compile(r"^[0-9a-f]{64}\Z")  # an idempotency key: SHA-256 in hex (executor/keys.py)
# The key as the hash index of migration traces 0007 covers it (PostgreSQL): empty → NULL.
# The '' is written into the SQL, not sent as a parameter, so that the expression is the
# index's even in a prepared statement's generic plan.
KEY_EXPR = Func(
    F("idempotency_key"), template="NULLIF(%(expressions)s, '')", output_field=CharField()
)
RUN_FIELDS = ("run_id", "trace_id", "status", "created_at", "agent__name")


class BadQuery(ValueError):
    """A query that cannot be searched for; its text says why, for the person."""


def checked(raw: str) -> str:
    """The query, trimmed; BadQuery naming the problem when there is none to search."""
    q = raw.strip()
    if not q:
        raise BadQuery("Type something to search for: a run id, an order id or an e-mail.")
    if len(q) > MAX_QUERY:
        raise BadQuery(
            f"The search is {len(q)} characters long; an id or an e-mail is at most "
            f"{MAX_QUERY}. Paste the id alone."
        )
    if any(unicodedata.category(c) in ("Cc", "Cf", "Cs") for c in q):
        raise BadQuery(
            "The search holds an invisible character (a tab, a line break or a control "
            "character). Type or paste the id alone."
        )
    return q


@dataclass
class Match:
    run: Run
    what: str  # what matched, in words: "order id ord_1 in call charge"
    call: ToolCall | None = None  # the call it matched in, where the page can land
    approval: str = ""  # the approval id the query named: a reviewer lands on its page


@dataclass
class Group:
    title: str  # "tool_call_id tc-1 appears in 37 runs"
    matches: list[Match]
    more: int = 0  # runs found beyond those listed (-1: some, not counted)
    exact: bool = False


@dataclass
class Results:
    query: str
    groups: list[Group] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def runs(self, *, exact: bool | None = None) -> set[int]:
        return {
            m.run.pk for g in self.groups if exact is None or g.exact is exact for m in g.matches
        }

    def single(self) -> Match | None:
        """The one run the query names, where the page should go straight to: the only
        run an exact id names, else the only run found at all."""
        exact = self.runs(exact=True)
        found = exact or self.runs()
        if len(found) != 1 or any(g.more for g in self.groups if g.exact or not exact):
            return None
        groups = [g for g in self.groups if g.exact] if exact else self.groups
        # Prefer a match in a call: the page lands at it.
        matches = [m for g in groups for m in g.matches]
        return next((m for m in matches if m.call is not None), matches[0])


def _runs() -> QuerySet[Run]:
    return Run.objects.select_related("agent").only(*RUN_FIELDS).order_by("-created_at", "-pk")


def _plural(n: int) -> str:
    return f"{n} run{'s' if n != 1 else ''}"


def _exact_runs(q: str) -> list[Group]:
    """Runs whose run_id or trace_id is `q` (a run_id is unique per agent only, and one
    trace may hold several runs)."""
    groups = []
    found = list(_runs().filter(Q(run_id=q) | Q(trace_id=q))[: LIMIT + 1])
    for name in ("run_id", "trace_id"):
        runs = [r for r in found if getattr(r, name) == q]
        if not runs:
            continue
        title = f"{name} {q}" + (f" names {_plural(len(runs))}" if len(runs) > 1 else "")
        matches = [Match(r, name) for r in runs[:LIMIT]]
        groups.append(Group(title, matches, more=-1 if len(runs) > LIMIT else 0, exact=True))
    return groups


def _exact_approval(q: str) -> list[Group]:
    """The approval whose id is `q` (unique), as a match in the call it holds."""
    if not q.startswith("ap-"):  # every approval id does (approvals/models.py)
        return []
    call = (
        ToolCall.objects.filter(approval__approval_id=q)
        .select_related("run__agent")
        .only("call_id", "tool_call_id", "tool", "created_at", *(f"run__{f}" for f in RUN_FIELDS))
        .first()
    )
    if call is None:
        return []
    match = Match(call.run, f"approval of call {call.tool}", call, approval=q)
    return [Group(f"approval {q}", [match], exact=True)]


def _call_field(call: ToolCall, q: str) -> str:
    if call.tool_call_id == q:
        return "tool_call_id"
    return "call_id" if call.call_id == q else "idempotency key"


def _exact_calls(q: str) -> list[Group]:
    """Calls whose tool_call_id, call_id or idempotency key is `q`: a tool_call_id such as
    "tc-1" is in every run, so the runs are counted and only the most recent listed."""
    named = Q(tool_call_id=q) | Q(call_id=q)
    found = ToolCall.objects.all()
    if KEY_RE.match(q):
        # Only for a query that can be a key: every index searched costs its look-up.
        found = found.annotate(key_or_null=KEY_EXPR)
        named |= Q(key_or_null=q)
    calls = (
        found.filter(named)
        .select_related("run__agent")
        .only("call_id", "tool_call_id", "tool", "created_at", *(f"run__{f}" for f in RUN_FIELDS))
        .order_by("-run__created_at", "-run_id", "-created_at")
    )
    fetched = list(calls[: LIMIT * 2])
    matches: dict[int, Match] = {}
    for call in fetched:
        if call.run_id not in matches and len(matches) < LIMIT:
            what = f"{_call_field(call, q)} of call {call.tool}"
            matches[call.run_id] = Match(call.run, what, call)
    if not matches:
        return []
    total = len(matches)
    if total == LIMIT or len(fetched) == LIMIT * 2:  # there may be more: count them
        total = found.filter(named).aggregate(n=Count("run_id", distinct=True))["n"]
    fields = sorted({_call_field(m.call, q) for m in matches.values() if m.call})
    title = f"{' or '.join(fields)} {q}"
    if total > 1:
        title += f" appears in {_plural(total)}" + (", the most recent:" if total > LIMIT else "")
    return [Group(title, list(matches.values()), more=total - len(matches), exact=True)]


def _what_key(key: SearchKey, text: str) -> str:
    """How a key match reads: the value is shown back only when it is neither an e-mail
    nor under a field named as sensitive; either is "matched privately"."""
    if is_email(text):
        return f"e-mail (matched privately) in call {key.call.tool}"
    name = label(key.field).lower()
    if SENSITIVE_KEY.search(key.field):
        return f"{name} (matched privately) in call {key.call.tool}"
    return f"{name} {text} in call {key.call.tool}"


def _index(q: str) -> list[Group]:
    text = normalized(q)
    if text is None:
        return []
    keys = (
        SearchKey.objects.filter(digest=digest(text))
        .select_related("run__agent", "call")
        .only(
            "field",
            "call__tool",
            "call__call_id",
            "call__created_at",
            "call__run_id",
            *(f"run__{f}" for f in RUN_FIELDS),
        )
        .order_by("-run__created_at", "-run_id", "call__created_at", "call_id")
    )
    # A value is in a few calls of a run (an order id: the order, the charge, the undo):
    # the earliest is the one that made it (the order), where the page lands.
    fetched = list(keys[: LIMIT * 4])
    matches: dict[int, Match] = {}
    for key in fetched:
        if key.run_id not in matches and len(matches) < LIMIT:
            matches[key.run_id] = Match(key.run, _what_key(key, text), key.call)
    if not matches:
        return []
    total = len(matches)
    if total == LIMIT or len(fetched) == LIMIT * 4:  # there may be more: count them
        total = SearchKey.objects.filter(digest=digest(text)).aggregate(
            n=Count("run_id", distinct=True)
        )["n"]
    title = "An e-mail address" if is_email(text) else "A business key"
    title += f" in {_plural(total)}" + (", the most recent:" if total > LIMIT else "")
    return [Group(title, list(matches.values()), more=total - len(matches))]


def _run_id_parts(q: str, shown: set[int]) -> list[Group]:
    """Runs whose id starts with `q`, then those that contain it: two queries, each of
    which PostgreSQL answers from an index (migration traces 0006) — the second only when
    the first leaves room on the page, for a part most run ids share ("demo-") would read
    the whole table to find none that are not prefixes."""
    runs = _runs().exclude(run_id=q).exclude(pk__in=shown)
    found = [(r, "run_id starts with it") for r in runs.filter(run_id__startswith=q)[: LIMIT + 1]]
    if len(found) <= LIMIT:
        inside = runs.filter(run_id__contains=q).exclude(run_id__startswith=q)
        found += [(r, "run_id contains it") for r in inside[: LIMIT + 1 - len(found)]]
    if not found:
        return []
    matches = [Match(run, what) for run, what in found[:LIMIT]]
    return [Group(f"Run ids with {q} in them", matches, more=-1 if len(found) > LIMIT else 0)]


def run_search(q: str) -> Results:
    """Every kind of match for the checked query `q` (see the module's docstring)."""
    results = Results(q)
    results.groups += _exact_runs(q) + _exact_calls(q) + _exact_approval(q)
    results.groups += _index(q)
    if len(q) >= MIN_PART:
        results.groups += _run_id_parts(q, results.runs())
    else:
        results.notes.append(
            f"Type at least {MIN_PART} characters to find runs by a part of their id."
        )
    return results
