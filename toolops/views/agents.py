"""The agents and their tokens as the console shows them: which is active, the start of
its token, and when its token was last used (to the minute)."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from toolops.models import Agent
from toolops.permissions import console_required
from toolops.views.common import HtmxHttpRequest, page_context


@require_GET
@console_required
def agent_list(request: HtmxHttpRequest) -> HttpResponse:
    agents = Agent.objects.order_by("name").only(
        "name", "token_hint", "is_active", "rate_limit_per_minute", "created_at", "last_used_at"
    )
    return render(request, "toolops/agents.html", page_context(request, "agents", agents=agents))
