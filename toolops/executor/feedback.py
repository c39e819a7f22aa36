"""The `feedback` line for the model: what happened and what to do next, in at most 400
characters and never a stack trace."""

from __future__ import annotations

LIMIT = 400


def _cap(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= LIMIT else text[: LIMIT - 1].rstrip() + "…"


def _short(message: str, limit: int = 120) -> str:
    message = " ".join(message.split())
    return message if len(message) <= limit else message[: limit - 1] + "…"


def succeeded(tool: str) -> str:
    return _cap(f"{tool} succeeded. Use its result; do not call it again for the same step.")


def replayed(tool: str, status: str) -> str:
    return _cap(
        f"This {tool} call was already made in this step; this is its recorded outcome "
        f"({status}). It was not sent again."
    )


def unknown_tool(name: str, close: list[str]) -> str:
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return _cap(f"There is no tool named {name!r}.{hint} Call one of the available tools instead.")


def invalid_args(tool: str, problem: str) -> str:
    return _cap(
        f"The args for {tool} are invalid: {_short(problem, 250)}. Fix them and call again."
    )


def fatal(tool: str, message: str) -> str:
    return _cap(
        f"{tool} rejected the request ({_short(message)}). Retrying the same call will fail "
        "again: change the args or take another approach."
    )


def internal_error(tool: str) -> str:
    """A tool's own bug (an exception it did not mean to raise): its text is the code's,
    for operators, never for the model."""
    return _cap(
        f"{tool} failed with an internal error, logged for ToolOps' operators; it gave no "
        "result. The same call will likely fail the same way: continue without it if you "
        "can, and tell the user what could not be done."
    )


def exhausted(tool: str, attempts: int, message: str) -> str:
    return _cap(
        f"{tool} failed after {attempts} attempt{'s' if attempts != 1 else ''} "
        f"({_short(message)}). It may be temporarily down: continue without it if you can, "
        "and tell the user what could not be done."
    )


def partial(tool: str, message: str) -> str:
    return _cap(
        f"{tool} could only return partial data ({_short(message)}). Continue with what you "
        "have and tell the user what is missing."
    )


def result_invalid(tool: str, message: str) -> str:
    return _cap(
        f"{tool} answered, but its result is incomplete or malformed ({_short(message)}). "
        "Use what is usable with care and do not repeat the call."
    )


def too_large(tool: str, message: str, *, done: bool) -> str:
    if done:
        return _cap(
            f"{tool} was done, but its answer was too large to read ({_short(message)}), so "
            "there is no result. Do not call it again: tell the user it went through."
        )
    return _cap(
        f"{tool} answered with more than ToolOps reads ({_short(message)}), so there is no "
        "result. Ask for less (narrower args, or one page at a time) instead of repeating it."
    )


def unknown(tool: str, message: str, *, query: str | None) -> str:
    checking = f"it is being checked with {query}" if query else "a person will check it"
    return _cap(
        f"{tool} did not answer clearly ({_short(message, 80)}) and its outcome is unknown. "
        f"Do not retry: {checking}. Tell the user the action is being verified."
    )


def budget_exhausted(what: str) -> str:
    return _cap(
        f"The run's budget is exhausted ({what}). Stop calling tools and summarise what "
        "was done for the user."
    )


def dependency_failed(ids: list[str]) -> str:
    return _cap(
        f"Skipped: this call depends on {', '.join(ids)}, which did not succeed, so nothing "
        "was sent. Resolve that first or take another path."
    )


def circuit_open(tool: str, until: str | None) -> str:
    when = f" until {until}" if until else " for now"
    return _cap(
        f"{tool} is temporarily unavailable{when}: it has been failing, so ToolOps is not "
        "sending it requests. Do not retry it before then; use another tool or tell the user "
        "it is unavailable."
    )


def reconciled(tool: str, query: str) -> str:
    return _cap(
        f"{tool} succeeded: its response was lost, and {query} confirmed the result. Use it; "
        "do not call it again."
    )


def already_done(tool: str, query: str) -> str:
    return _cap(
        f"{tool} was already done ({query} found it), so it was not sent again. Use the "
        "result; do not call it again."
    )


def not_applied(tool: str, query: str) -> str:
    return _cap(
        f"{tool} did not take effect ({query} found no trace of it). You may call it again "
        "in a new step if it is still needed."
    )


def settled(tool: str, *, succeeded: bool) -> str:
    if succeeded:
        return _cap(f"{tool} was checked by a person and did take effect. Use its result.")
    return _cap(
        f"{tool} was checked by a person and did not take effect. You may call it again in "
        "a new step if it is still needed."
    )


def pending_approval(tool: str, reason: str, *, rule: str = "", over_limit: str = "") -> str:
    """`rule`: the agent policy's rule that holds it; `over_limit`: the sentence of the
    limit it passed (policy/wording.py), which then says it all."""
    if over_limit:
        return _cap(
            f"{over_limit} Nothing was sent. Poll this call by its call_id "
            "(GET /api/v1/calls/<call_id>?wait=30) for the decision; do not call it again."
        )
    why = {
        "irreversible": "it cannot be undone",
        "policy": "policy requires a person to approve it",
        "possible_duplicate": "it repeats a call made in another run of this conversation",
    }.get(reason, "it needs a person's approval")
    if rule:
        why = f"the policy's rule {rule!r} asks a person to approve it"
    return _cap(
        f"{tool} is waiting for a reviewer because {why}. Nothing was sent. Poll this call "
        "by its call_id (GET /api/v1/calls/<call_id>?wait=30) for the decision; do not call "
        "it again."
    )


def rejected(tool: str, note: str) -> str:
    said = f" The reviewer said: {_short(note, 200).rstrip('.')}." if note.strip() else ""
    return _cap(
        f"A reviewer rejected {tool}; nothing was sent.{said} Do not retry it as it was: "
        "change the plan, or ask the user."
    )


def expired(tool: str) -> str:
    return _cap(
        f"No reviewer decided on {tool} in time, so it was not run and nothing was sent. "
        "Ask the user whether it is still wanted before calling it again."
    )


def run_ended(tool: str, why: str) -> str:
    return _cap(
        f"{tool} was not run and nothing was sent: {why} before a reviewer's approval could "
        "take effect. The run takes no more calls."
    )


def args_unavailable(tool: str) -> str:
    return _cap(
        f"{tool} was not run and nothing was sent: ToolOps could not decrypt the args it kept "
        "for this call (an operator must fix its keys). Call it again in a new step if it is "
        "still needed."
    )


def result_unavailable_feedback(tool: str) -> str:
    return _cap(
        f"ToolOps could not decrypt this {tool} call's result, so `result` is null; the "
        "call's status stands. Do not call it again to get the result: ask an operator."
    )


def not_permitted(tool: str, rule: str, version: int, *, granted: bool) -> str:
    if not granted:
        why = f"policy v{version} does not grant {tool} to this agent"
    else:
        why = f"policy v{version} refuses this call (rule {rule!r})"
    return _cap(
        f"Not permitted: {why}. Nothing was sent. Do not call it again; tell the user it "
        "is not allowed, or do without it."
    )


def spend_limit(sentence: str) -> str:
    return _cap(sentence)
