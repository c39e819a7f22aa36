"""The agent's own view of the policy in force (API.md "Agent policy"): `GET /api/v1/policy`
and, with the same JSON, MCP's `toolops_policy` tool (toolops/mcp/policy.py).

An agent sees the version, the tools it may call and the limits that apply to it, with
what it has spent this period: never another agent's grants or limits, and never a rule
(a rule's condition tells a model how to word a call so that it passes).

Where API.md is silent:
- A limit's `tools` are the tools it names that the agent may call (`"*"`: every public
  tool the agent may call); a limit that leaves the agent no tool is not shown.
- A sum over a tool with a `currency` field is counted per currency (limits.currency_of):
  such a limit is one entry per currency the agent has spent in this period, each with a
  `currency` key, or one entry with `currency` null and nothing spent. Adding euros to
  dollars would show a number no call is checked against.
- `spent` is the counter the agent's next call would be checked against: reservations,
  so a call still waiting or in progress is counted, and a call that ended not done is
  not."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from toolops.models import Agent
from toolops.policy import limits as spend
from toolops.policy.active import current, tools_for
from toolops.policy.document import PERIODS, WILDCARD, Limit, matches
from toolops.tools import registry
from toolops.tools.spec import ToolSpec

from .agent_request import AgentRequest
from .output import ProblemSchema, iso


def agent_tools(agent: Agent) -> list[ToolSpec]:
    """The public tools the agent may call under the policy in force, in catalog order."""
    tools = registry.public_tools()
    allowed = set(tools_for(current(), agent.name, [spec.name for spec in tools]))
    return [spec for spec in tools if spec.name in allowed]


def agent_policy(agent: Agent) -> dict[str, Any]:
    """The agent's view of the policy (API.md): version, its tools, its limits."""
    policy = current()
    tools = registry.public_tools()
    names = [spec.name for spec in tools]
    if policy is None:
        return {"version": None, "tools": names, "limits": []}
    mine = tools_for(policy, agent.name, names)
    by_name = {spec.name: spec for spec in tools}
    shown: list[dict[str, Any]] = []
    for limit in policy.document.limits:
        if not matches(limit.agents, agent.name):
            continue
        covered = mine if WILDCARD in limit.tools else [n for n in limit.tools if n in mine]
        if covered:
            shown.extend(_limit_entries(agent, limit, [by_name[n] for n in covered]))
    return {"version": policy.version, "tools": mine, "limits": shown}


def _limit_entries(agent: Agent, limit: Limit, tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    period = spend.period(limit)
    counters = spend.spent(agent.pk, limit, period.key)
    entry: dict[str, Any] = {
        "name": limit.name,
        "tools": [spec.name for spec in tools],
        "sum": limit.sum,
        "spent": None,
        "max": spend.shown(limit, spend.cap_units(limit)),
        "per": limit.per,
        "time_zone": limit.time_zone,
        "resets_at": iso(period.resets_at),
    }
    if not _per_currency(limit, tools):
        # The one counter a call of these tools is checked against (currency "").
        return [{**entry, "spent": spend.shown(limit, counters.get("", 0))}]
    spent = sorted((c, units) for c, units in counters.items() if units > 0) or [("", 0)]
    return [
        {**entry, "spent": spend.shown(limit, units), "currency": currency or None}
        for currency, units in spent
    ]


def _per_currency(limit: Limit, tools: Sequence[ToolSpec]) -> bool:
    """A sum whose counters are kept per currency: one of its tools has `currency`."""
    return limit.sum is not None and any(
        "currency" in (spec.params_schema.get("properties") or {}) for spec in tools
    )


# -- schema ---------------------------------------------------------------------------


@extend_schema_field(
    {"oneOf": [{"type": "string", "format": "decimal"}, {"type": "integer", "minimum": 0}]}
)
class AmountField(serializers.Field):
    """A decimal string for a sum (`"480.00"`), an integer for a count of calls."""

    def to_representation(self, value: Any) -> Any:
        return value


class AgentPolicyLimitSchema(serializers.Serializer):
    name = serializers.CharField()
    tools = serializers.ListField(
        child=serializers.CharField(), help_text="The limit's tools that this agent may call."
    )
    sum = serializers.CharField(
        allow_null=True, help_text="The decimal args field summed; null: calls are counted."
    )
    spent = AmountField(help_text="Reserved this period (a decimal string, or calls).")
    max = AmountField()
    per = serializers.ChoiceField(choices=PERIODS)
    time_zone = serializers.CharField()
    resets_at = serializers.DateTimeField(allow_null=True, help_text="null for `total`.")
    currency = serializers.CharField(
        required=False,
        allow_null=True,
        help_text="Only for a sum over a tool with a `currency` field: one entry per "
        "currency spent this period (null, with nothing spent, before the first).",
    )


class AgentPolicySchema(serializers.Serializer):
    version = serializers.IntegerField(allow_null=True, help_text="null: no policy in force.")
    tools = serializers.ListField(child=serializers.CharField())
    limits = AgentPolicyLimitSchema(many=True)


class PolicyDetailApi(APIView):
    @extend_schema(responses={200: AgentPolicySchema, 401: ProblemSchema})
    def get(self, request: AgentRequest) -> Response:
        return Response(agent_policy(request.user))
