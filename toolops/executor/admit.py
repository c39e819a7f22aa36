"""The agent policy at the door (API.md "Agent policy"): after the args are checked and
before anything is claimed or sent, the policy in force — read with the run
(context.py) — says whether the call is permitted, whether it waits for a person, and
what spend it reserves. The reservation itself is taken by the claim's statement
(statements/claim.py); this module decides what a call over a limit becomes: refused with
`spend_limit`, or held for a reviewer when the limit says `on_exceed = "approve"`.

Without a policy nothing here runs: `verdict` answers None at the cost of one test."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from toolops.models import ToolCall
from toolops.policy import limits as spend
from toolops.policy import verdict as policy
from toolops.policy import wording
from toolops.policy.document import Limit
from toolops.policy.limits import Hold
from toolops.policy.verdict import Verdict
from toolops.tools.spec import ToolSpec

from . import feedback
from .context import CallContext
from .endings import end

Status = ToolCall.Status
Reason = ToolCall.Reason


def verdict(context: CallContext, call: ToolCall, spec: ToolSpec, args: Any) -> Verdict | None:
    """The policy's word on the call, recorded on it (None: no policy is in force)."""
    active, agent = context.policy, context.agent
    if active is None or agent is None:
        return None
    decided = policy.verdict(
        active,
        agent=agent.name,
        agent_created=agent.created_at,
        spec=spec,
        args=args if isinstance(args, Mapping) else {},
    )
    call.policy_version = decided.version
    call.policy_rules = decided.rules or None
    call.policy_holds = [hold.as_json() for _, hold in decided.charges] or None
    return decided


def refused(call: ToolCall, decided: Verdict) -> bool:
    """End a call the policy does not permit (no grant, or a `refuse` rule). True when
    it was ended: nothing is claimed or sent."""
    if decided.refused_by is None:
        return False
    granted = decided.refused_by != policy.NOT_GRANTED
    what = f"policy v{decided.version}: " + (
        f"rule {decided.refused_by!r} refuses it" if granted else "no grant gives this tool"
    )
    call.policy_holds = None
    end(
        call,
        Status.FAILED,
        "fatal",
        Reason.NOT_PERMITTED,
        what,
        feedback.not_permitted(call.tool, decided.refused_by, decided.version, granted=granted),
    )
    return True


def holds(decided: Verdict | None) -> list[Hold]:
    return [] if decided is None else [hold for _, hold in decided.charges]


def past_limits(decided: Verdict, over: Sequence[int]) -> tuple[list[Hold], str] | None:
    """The holds a call over `over` (indexes) takes when every limit it passed lets a
    reviewer decide (`on_exceed = "approve"`): those limits' holds uncapped, and the
    first such limit's name for its approval. None when one of them refuses."""
    passed = [decided.charges[i][0] for i in over]
    if any(limit.on_exceed != "approve" for limit in passed):
        return None
    uncapped = [
        replace(hold, cap=None) if i in over else hold
        for i, (_, hold) in enumerate(decided.charges)
    ]
    return uncapped, passed[0].name


def over_sentence(
    call: ToolCall, decided: Verdict, over: Sequence[int], agent_id: int, *, held: bool
) -> tuple[Limit, str]:
    """The limit a call passed (a refusing one first), and the sentence for the model:
    spent, max and when it resets."""
    index = next((i for i in over if decided.charges[i][0].on_exceed == "refuse"), over[0])
    limit, hold = decided.charges[index]
    spent = spend.spent(agent_id, limit, hold.period).get(hold.currency, 0)
    sentence = wording.limit_reached(
        limit,
        tool=call.tool,
        spent=spend.shown(limit, spent),
        cap=spend.shown(limit, spend.cap_units(limit)),
        currency=hold.currency,
        resets_at=spend.period(limit).resets_at,
        held=held,
    )
    return limit, sentence


def end_over_limit(call: ToolCall, decided: Verdict, over: Sequence[int], agent_id: int) -> None:
    """End a call over a limit that refuses: `spend_limit`, with spent, max and when the
    limit resets in the feedback. Nothing was reserved, claimed or sent."""
    limit, sentence = over_sentence(call, decided, over, agent_id, held=False)
    call.policy_holds = None
    call.policy_rules = [*(call.policy_rules or []), [limit.name, "refuse"]]
    end(
        call,
        Status.FAILED,
        "fatal",
        Reason.SPEND_LIMIT,
        f"limit {limit.name!r} reached",
        feedback.spend_limit(sentence),
    )


def reserve_now(call: ToolCall, decided: Verdict | None, agent_id: int) -> tuple[int, ...]:
    """A read's reservations, on their own (a read takes no claim to fold them into).
    The indexes of the holds that did not fit (then none is kept)."""
    taken = holds(decided)
    if not taken:
        return ()
    return spend.reserve_all(agent_id, taken)
