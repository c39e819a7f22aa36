"""/console/audit/: the one audit log (toolops/audit/), for operators and superusers,
newest first, filtered by person, action and date in the URL."""

from __future__ import annotations

from django.http import HttpResponse, QueryDict
from django.shortcuts import render
from django.views.decorators.http import require_GET

from toolops.audit.selectors import PAGE, AuditFilterForm, AuditPage, audit_entries
from toolops.permissions import console_required, require_audit_reader
from toolops.views.common import HtmxHttpRequest, page_context

FILTERS = ("actor", "action", "since", "until")


@require_GET
@console_required
def audit_log(request: HtmxHttpRequest) -> HttpResponse:
    require_audit_reader(request.user)
    form = AuditFilterForm(request.GET)
    if form.is_valid():
        data = form.cleaned_data
        page = audit_entries(**{name: data[name] for name in (*FILTERS, "before")})
        status = 200
    else:
        # A bad filter shows why, and no entries: never a guess at what was meant.
        page, status = AuditPage([], None), 400
    ctx = page_context(
        request,
        "audit",
        form=form,
        page=page,
        per_page=PAGE,
        filtered=any(request.GET.get(name) for name in FILTERS),
        older_query=_query(request.GET, before=page.older) if page.older else "",
        newest_query=_query(request.GET, before=None),
        paged=bool(request.GET.get("before")),
    )
    return render(request, "console/audit.html", ctx, status=status)


def _query(params: QueryDict, *, before: int | None) -> str:
    """The same filters, on another page."""
    kept = QueryDict(mutable=True)
    for name in FILTERS:
        value = params.get(name)
        if value:
            kept[name] = value
    if before is not None:
        kept["before"] = str(before)
    return kept.urlencode()
