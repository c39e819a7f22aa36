"""The console's home, `/console/`: what needs the person now, each thing a link to where
it is worked (toolops/views/attention.py), or "Nothing needs you now" and the last few
things that happened. It refreshes itself (htmx, every HOME_POLL_S).

Every role lands here from the brand link and "Home", with the signals of the work it may
do: reviewers their approvals, support their tickets, operators everything. (After a login
reviewers and support still land on their queue: toolops/views/login.py.) Chosen over
sending reviewers and support on to their queue: a person in two groups gets both on one
page, and each sees "Nothing needs you now" plainly rather than an empty queue.

`nav_counts`: the menu's badges (unknown outcomes, approvals, tickets) for every page's
poll (templates/console/_nav_counts.html), as htmx out-of-band swaps."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from toolops.permissions import console_required
from toolops.views.attention import EXPIRING_SOON, LONG_WAIT, attention_for, lately_for
from toolops.views.common import HtmxHttpRequest, is_refresh, page_context

# The home polls rather than listening to pushes: what it shows changes with runs,
# approvals, tickets, breakers and the outbox, more groups than a page's one socket
# follows, and each look is a handful of bounded reads.
HOME_POLL_S = 10


@require_GET
@vary_on_headers("HX-Request")
@never_cache
@console_required
def home(request: HtmxHttpRequest) -> HttpResponse:
    now = timezone.now()
    attention = attention_for(user=request.user, now=now)
    ctx = {
        "attention": attention,
        "lately": lately_for(user=request.user, now=now) if attention.empty else None,
        "now": now,
        "poll_s": HOME_POLL_S,
        "long_wait_min": int(LONG_WAIT.total_seconds() // 60),
        "expiring_min": int(EXPIRING_SOON.total_seconds() // 60),
    }
    if is_refresh(request):
        return render(request, "console/home.html#home-live", ctx)
    return render(request, "console/home.html", page_context(request, "home", **ctx))


@require_GET
@never_cache
@console_required
def nav_counts(request: HtmxHttpRequest) -> HttpResponse:
    """The nav's badges, each an out-of-band swap of its namesake in the menu."""
    ctx = page_context(request, "", oob=True)
    return render(request, "console/_nav_counts.html", ctx)
