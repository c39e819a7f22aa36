"""`{% policy_said call=call %}` / `{% policy_said approval=approval %}`: a call the agent
policy refused or held, said in one line on the pages people read it — the run timeline
and the approval's page: "Refused by policy rule “big orders” (policy v7)", "Held by
policy limit “charges per day” (policy v7)", with a link to that version's page.

What the call records is enough for a refusal (its reason says a rule or a limit); a hold
names only the rule or limit that asked for a person (`Approval.rule`), so whether it is a
limit is read from the version's text — its [[limit]] tables' names, once per version per
page, and only for a held call. This module sits with the models (the import layers): it
reads the stored text with tomllib, never through the policy's own parser."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from typing import Any

from django import template
from django.urls import reverse

from toolops.policy.models import PolicyVersion

register = template.Library()

REFUSING = {"not_permitted", "spend_limit"}
# Toolops/policy/verdict.py's NOT_GRANTED: the call's tool is in no grant of the agent's.
NOT_GRANTED = "not granted"
CACHE = "policy_said.limits"


@dataclass(frozen=True)
class Said:
    verb: str  # "Refused" or "Held"
    what: str  # "rule", "limit" or "grant"
    name: str
    version: int

    @property
    def url(self) -> str:
        return reverse("console:policy-version", args=[self.version])


@register.inclusion_tag("console/policy_said.html", takes_context=True)
def policy_said(context: Any, call: Any = None, approval: Any = None) -> dict[str, Any]:
    """The line for `call` (refused, or held through its approval) or `approval`."""
    said = _refused(call) if call is not None else None
    if said is None:
        held = approval if approval is not None else getattr(call, "approval", None)
        said = _held(context, held) if held is not None else None
    return {"said": said}


def _refused(call: Any) -> Said | None:
    if call.error_reason not in REFUSING or call.policy_version is None:
        return None
    refusing = [name for name, action in call.policy_rules or () if action == "refuse"]
    if not refusing:
        return None
    if call.error_reason == "spend_limit":
        # The limit is recorded last, after the rules that matched.
        return Said("Refused", "limit", refusing[-1], call.policy_version)
    name = refusing[0]
    return Said("Refused", "grant" if name == NOT_GRANTED else "rule", name, call.policy_version)


def _held(context: Any, approval: Any) -> Said | None:
    if not approval.rule or approval.policy_version is None:
        return None
    limits = _limit_names(context, approval.policy_version)
    what = "limit" if approval.rule in limits else "rule"
    return Said("Held", what, approval.rule, approval.policy_version)


def _limit_names(context: Any, number: int) -> frozenset[str]:
    cache = context.render_context.setdefault(CACHE, {})
    if number not in cache:
        text = PolicyVersion.objects.filter(number=number).values_list("text", flat=True).first()
        cache[number] = _names(text or "")
    return cache[number]


def _names(text: str) -> frozenset[str]:
    try:
        tables = tomllib.loads(text).get("limit", [])
    except tomllib.TOMLDecodeError:
        return frozenset()
    if not isinstance(tables, list):
        return frozenset()
    return frozenset(str(t.get("name", "")).strip() for t in tables if isinstance(t, dict))
