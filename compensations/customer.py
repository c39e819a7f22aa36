"""What the customer faces, in one sentence, from the run's calls: "The customer was
charged 89.00 EUR (ch_1); the order ord_1 was cancelled; the refund has not been made."
Once the refund is made: "…; refunded on 7 Dec 2026 at 06:31 UTC (refund re_1)."

Nothing here knows a tool by name. Each write of the run that took effect says what it
did from the catalog and the call: its verb and object from the tool's name
("create_order" → created, order; "charge" → charged), the thing it made from its undo's
args or its result (the first `…_id`: "order_id" → the order ord_1), the money from the
args field its params_schema declares `format = "decimal"` (and `currency`). Its undo
says what became of it: an undo that names a thing ("cancel_order") tells where that
thing is now ("the order ord_1 was cancelled"); one that acts on the customer ("refund")
is a clause of its own, dated once made. Reads change nothing the customer faces and are
left out. The values are redacted like every other text about a call (traces/sensitive.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from compensations.models import Compensation, Ticket
from toolops.models import ToolCall
from toolops.templatetags.when import day_words
from toolops.tools import registry
from toolops.tools.spec import ToolSpec
from traces.services import redact

CS = Compensation.Status
# A run may make many writes: the sentence names this many besides the ticket's own.
MAX_OTHERS = 5
# Verbs whose past is not made by a rule (English).
IRREGULAR = {
    "buy": "bought",
    "do": "done",
    "get": "got",
    "give": "given",
    "hold": "held",
    "make": "made",
    "pay": "paid",
    "put": "put",
    "run": "run",
    "send": "sent",
    "set": "set",
    "take": "taken",
    "undo": "undone",
    "write": "written",
}
VOWELS = "aeiou"


@dataclass(frozen=True)
class Step:
    """One write of the run that took effect, as the catalog and the call say it."""

    call: ToolCall
    spec: ToolSpec | None
    compensation: Compensation | None


def customer_sentence(*, ticket: Ticket) -> str:
    """The consequence of the ticket's run for the customer, in one sentence, its own
    undo last (see the module docstring)."""
    steps = _steps(ticket.run_id)
    own = next((s for s in steps if s.call.pk == ticket.compensation.call_id), None)
    if own is None:  # the call is gone (retention) or was a read: nothing to say of it
        own = Step(ticket.compensation.call, registry.get(ticket.compensation.call.tool), None)
        steps = [own, *steps]
    others = [clause for s in steps if s is not own for clause in _clauses(s)]
    if len(others) > MAX_OTHERS:
        rest = len(others) - MAX_OTHERS
        others = [*others[:MAX_OTHERS], f"and {rest} other change{'s' if rest != 1 else ''}"]
    mine = _clauses(own)
    clauses = [*mine[:-1], *others, mine[-1]] if len(mine) > 1 else [*others, *mine]
    sentence = "; ".join(c for c in clauses if c)
    return f"{sentence[:1].upper()}{sentence[1:]}." if sentence else ""


def _steps(run_pk: int) -> list[Step]:
    """The run's writes that took effect, in step order, each with its undo (two queries)."""
    calls = ToolCall.objects.agent_calls().filter(run_id=run_pk, status__in=ToolCall.USABLE)
    undos = {
        c.call_id: c for c in Compensation.objects.filter(run_id=run_pk).select_related("undo_call")
    }
    steps = []
    for call in calls.order_by("step_index", "pk"):
        spec = registry.get(call.tool)
        compensation = undos.get(call.pk)
        if (spec is None and compensation is None) or (spec is not None and spec.is_read):
            continue
        steps.append(Step(call, spec, compensation))
    return steps


def _clauses(step: Step) -> list[str]:
    """What the step did and what became of it: one clause, or two when its undo acts on
    the customer rather than on a thing (a refund)."""
    compensation = step.compensation
    if compensation is None or compensation.status in (CS.REGISTERED, CS.DISCARDED):
        return [_done(step)]  # it stands: the run went on, or its undo was not needed
    verb, _ = verb_object(step.call.tool)
    undo_verb, undo_object = verb_object(compensation.tool)
    status = compensation.status
    if undo_object:
        noun, ident = _thing(step)
        the = _the(noun or undo_object, ident)
        if status == CS.SUCCEEDED:
            return [f"{the} was {past(undo_verb)}"]
        if status == CS.RESOLVED:
            return [f"{the} was {past(undo_verb)} by hand"]
        if status in (CS.PENDING, CS.RUNNING):
            return [f"{the} was {past(verb)} and is being {past(undo_verb)}"]
        return [f"{the} was {past(verb)} and has not been {past(undo_verb)}"]
    return [_done(step), _undone(compensation, undo_verb)]


def _done(step: Step) -> str:
    """ "the customer was charged 89.00 EUR (ch_1)", "the order ord_1 was created"."""
    verb, thing = verb_object(step.call.tool)
    noun, ident = _thing(step)
    money = _money(step)
    if money and not thing:
        return f"the customer was {past(verb)} {money}" + (f" ({ident})" if ident else "")
    noun = noun or thing or verb
    return f"{_the(noun, ident)} was {'made' if noun == verb else past(verb)}"


def _undone(compensation: Compensation, undo_verb: str) -> str:
    """What became of an undo that acts on the customer: "refunded on 7 Dec 2026 at
    06:31 UTC (refund re_1)", "the refund has not been made"."""
    status = compensation.status
    if status == CS.SUCCEEDED:
        when = f" on {day_words(compensation.finished_at)}" if compensation.finished_at else ""
        undo = compensation.undo_call
        args = compensation.args if isinstance(compensation.args, dict) else {}
        noun, ident = _first_id(_shown(undo.result, undo) if undo else None, skip=args)
        made = f" ({noun} {ident})" if ident else ""
        return f"{past(undo_verb)}{when}{made}"
    if status == CS.RESOLVED:
        return f"the {undo_verb} was made by hand"
    if status in (CS.PENDING, CS.RUNNING):
        return f"the {undo_verb} is being made"
    return f"the {undo_verb} has not been made"


def verb_object(tool: str) -> tuple[str, str]:
    """ "create_order" → ("create", "order"); "charge" → ("charge", "")."""
    words = tool.replace("-", "_").lower().split("_")
    return words[0], " ".join(w for w in words[1:] if w)


def past(verb: str) -> str:
    """The past participle: "charge" → "charged", "cancel" → "cancelled", "send" → "sent"."""
    if verb in IRREGULAR:
        return IRREGULAR[verb]
    if verb.endswith("e"):
        return f"{verb}d"
    if len(verb) > 1 and verb.endswith("y") and verb[-2] not in VOWELS:
        return f"{verb[:-1]}ied"
    consonant_vowel_consonant = (
        len(verb) >= 3 and verb[-2] in VOWELS and verb[-3] not in VOWELS and verb[-1] not in VOWELS
    )
    if consonant_vowel_consonant and verb[-1] == "l":
        return f"{verb}led"  # cancel → cancelled, as British English writes it
    short = sum(c in VOWELS for c in verb) == 1 and verb[-1] not in "wxy"
    if consonant_vowel_consonant and short:
        return f"{verb}{verb[-1]}ed"  # stop → stopped
    return f"{verb}ed"


def _the(noun: str, ident: str) -> str:
    return f"the {noun} {ident}" if ident else f"the {noun}"


def _shown(value: Any, call: ToolCall) -> Any:
    """A call's result as people may read it: redacted by its tool's rules."""
    return redact(value, spec=registry.get(call.tool), result=True)


def _thing(step: Step) -> tuple[str, str]:
    """The thing the step made, named by its id: from its undo's args (what the undo
    must find again), else from its result. ("order", "ord_1"), or ("", "")."""
    compensation = step.compensation
    if compensation is not None:
        noun, ident = _first_id(compensation.args)
        if ident:
            return noun, ident
    return _first_id(_shown(step.call.result, step.call))


def _first_id(values: Any, *, skip: dict[str, Any] | None = None) -> tuple[str, str]:
    """The first "…_id" field holding text, not among `skip`: ("refund", "re_1")."""
    if not isinstance(values, dict):
        return "", ""
    for key, value in values.items():
        if key.endswith("_id") and isinstance(value, str) and value and key not in (skip or {}):
            return key[:-3].replace("_", " "), value
    return "", ""


def _money(step: Step) -> str:
    """ "89.00 EUR": the args field the params_schema declares `format = "decimal"` (or
    one named amount), with the args' currency when there is one; "" when none."""
    args = redact(step.call.args, spec=step.spec) if step.spec else step.call.args
    if not isinstance(args, dict):
        return ""
    schema = step.spec.params_schema if step.spec else {}
    declared = schema.get("properties") if isinstance(schema, dict) else None
    decimals = [
        key
        for key, prop in (declared or {}).items()
        if isinstance(prop, dict) and prop.get("format") == "decimal" and key in args
    ]
    key = decimals[0] if decimals else ("amount" if "amount" in args else None)
    if key is None:
        return ""
    currency = args.get("currency")
    return f"{args[key]} {currency}" if isinstance(currency, str) and currency else str(args[key])
