"""The agents page (operators): each agent's token start, state and last use (to the
minute: a token nobody uses any more is one to revoke), its per-minute rate limit, the
default a new agent gets (TOOLOPS_AGENT_RATE_LIMIT_PER_MINUTE) and the cap on requests in
progress, and the form that changes an agent's limit. An agent with no limit can take a
whole web process's capacity by itself; this is where operators see and fix that."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from toolops import services
from toolops.api.auth import AGENT_CACHE_S
from toolops.forms import AgentRateLimitForm
from toolops.models import Agent
from toolops.permissions import console_required, require_policy_editor
from toolops.views.common import HtmxHttpRequest, page_context
from toolops.views.policy_read import AgentPolicy, agent_policies


@dataclass(frozen=True)
class AgentRow:
    """An agent as the page lists it (templates/console/agents.html)."""

    pk: int
    name: str
    token_hint: str
    is_active: bool
    rate_limit_per_minute: int | None
    created_at: datetime
    last_used_at: datetime | None
    # What the agent policy in force gives it: its tools and its limits' spending.
    policy_shown: AgentPolicy | None

    @classmethod
    def of(cls, agent: Agent, policy: AgentPolicy | None) -> AgentRow:
        return cls(
            pk=agent.pk,
            name=agent.name,
            token_hint=agent.token_hint,
            is_active=agent.is_active,
            rate_limit_per_minute=agent.rate_limit_per_minute,
            created_at=agent.created_at,
            last_used_at=agent.last_used_at,
            policy_shown=policy,
        )


def _limits() -> dict[str, object]:
    return {
        "default_rate_limit": settings.TOOLOPS_AGENT_RATE_LIMIT_PER_MINUTE,
        "max_inflight": settings.TOOLOPS_AGENT_MAX_INFLIGHT,
        "cache_s": AGENT_CACHE_S,
    }


@require_GET
@console_required
def agent_list(request: HtmxHttpRequest) -> HttpResponse:
    require_policy_editor(request.user)
    agents = list(Agent.objects.order_by("name"))
    policies = agent_policies(agents)
    rows = [AgentRow.of(agent, policies.get(agent.pk)) for agent in agents]
    ctx = page_context(request, "agents", agents=rows, policy=bool(policies), **_limits())
    return render(request, "console/agents.html", ctx)


@require_http_methods(["GET", "POST"])
@console_required
def agent_rate_limit_edit(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    require_policy_editor(request.user)
    agent = get_object_or_404(Agent, pk=pk)
    if request.method == "POST":
        form = AgentRateLimitForm(request.POST)
        if form.is_valid():
            services.agent_rate_limit_set(
                agent=agent,
                per_minute=form.per_minute(),
                by=request.user,
            )
            limit = form.per_minute()
            said = f"{limit} requests a minute" if limit else "no rate limit"
            messages.success(
                request,
                f"{agent.name} now has {said}; every web process applies it within "
                f"{AGENT_CACHE_S:g} s.",
            )
            return redirect("console:agents")
    else:
        form = AgentRateLimitForm(initial={"rate_limit_per_minute": agent.rate_limit_per_minute})
    ctx = page_context(request, "agents", agent=agent, form=form, **_limits())
    return render(request, "console/agent_rate_limit.html", ctx)
