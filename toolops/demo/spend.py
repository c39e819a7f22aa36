"""The agent policy's daily limit, as an agent meets it (docs/policy.md; the demo's
policy is toolops/demo/policy.toml). demo-cashier, an agent of its own, takes small
payments at the counter: its charges up to 100.00 need no reviewer (a `no_approval`
rule), and a limit keeps them under 500.00 EUR a day. It charges until the next charge
would pass that: the call fails `spend_limit` before anything is claimed or sent, and
its feedback tells the model what was spent, when the limit resets, and to ask the user
or stop.

The limit is the cashier's alone, so a re-run on the same day meets it at the first
charge (and says so) while demo-agent's scenarios charge as before."""

from __future__ import annotations

from toolops.demo.clients import JSON, ToolOps
from toolops.demo.logins import CASHIER_NAME
from toolops.demo.scenario import (
    CURRENCY,
    Demo,
    Outcome,
    charge_args,
    expect,
    expect_status,
    quote,
    reason,
)

# 434.00 after five charges; the sixth would make 533.00, past 500.00.
AMOUNTS = ("80.00", "95.00", "100.00", "60.00", "99.00", "99.00", "99.00")
LIFTING_RULE = "cashier charges up to 100"
LIMIT = "charges per day"
PAGE = "/console/policy/"
NO_TOKEN = (
    f"no token for {CASHIER_NAME}: `manage.py demo` passes it; by hand, --cashier-token "
    f"or the agent:{CASHIER_NAME} line of the demo's logins file"
)


def daily_limit(demo: Demo) -> Outcome:
    """Charges without a reviewer until the daily limit refuses one."""
    cashier = demo.cashier
    if cashier is None:
        return Outcome(False, NO_TOKEN)
    run = demo.new_run("daily-limit", api=cashier)
    charged: list[str] = []
    refused: JSON | None = None
    for step, amount in enumerate(AMOUNTS):
        order_id = f"ord_counter_{demo.stamp}_{step + 1}"
        call = cashier.call(
            run, step, "charge", charge_args(order_id, amount), tool_call_id=f"tc-{step + 1}"
        )
        if reason(call) == "spend_limit":
            refused = call
            break
        expect_status(call, "succeeded")
        rules = (call.get("policy") or {}).get("rules") or []
        expect(LIFTING_RULE in rules, f"charge {amount} was decided by {rules}, not the cashier's")
        charged.append(amount)
    if refused is None:
        cashier.run_complete(run)
        return Outcome(
            False,
            f"run {run}: {len(AMOUNTS)} charges and no limit met — is the demo's policy in "
            f"force? ({PAGE})",
        )
    return _refused(demo, cashier, run, charged, refused)


def _refused(demo: Demo, cashier: ToolOps, run: str, charged: list[str], call: JSON) -> Outcome:
    """The charge the limit refused: failed, nothing sent, and told why."""
    feedback = call.get("feedback") or ""
    expect(call["status"] == "failed", f"the charge over the limit is {call['status']}")
    expect(f"limit '{LIMIT}'" in feedback and "Ask the user or stop." in feedback, feedback)
    sent = demo.shop.requests_for_run("/payments/charges", run)
    expect(len(sent) == len(charged), f"{len(sent)} charges reached the shop, not {len(charged)}")
    cashier.run_complete(run)
    return _told(run, charged, feedback)


def _told(run: str, charged: list[str], feedback: str) -> Outcome:
    amount = AMOUNTS[len(charged)]  # the charge the limit refused
    said = quote(feedback, 220)
    if not charged:
        return Outcome(
            True,
            f"run {run}: {CASHIER_NAME}'s first charge of {amount} {CURRENCY} failed "
            f"spend_limit at once, nothing sent — earlier demo runs today left too little of "
            f"its daily limit: {said}",
        )
    return Outcome(
        True,
        f"run {run}: {CASHIER_NAME} charged {', '.join(charged)} {CURRENCY} with no reviewer "
        f"(rule “{LIFTING_RULE}”); the next charge, {amount}, failed spend_limit and "
        f"nothing was sent: {said} — its spend today is on {PAGE} (log in as operator)",
    )
