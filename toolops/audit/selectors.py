"""Reading the audit log for /console/audit/: the filters in the URL, checked (a bad
value is a message on the page, never a 500), and one page of entries, newest first."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Any

from django import forms
from django.db.models import QuerySet
from django.utils import timezone

from toolops.audit.models import AuditEntry

PAGE = 100
DAY = forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d")


class AuditFilterForm(forms.Form):
    """`?actor=<username>&action=<action>&since=YYYY-MM-DD&until=YYYY-MM-DD&before=<id>`;
    every field optional. `before` is the keyset cursor: entries older than that id."""

    actor = forms.CharField(required=False, max_length=150, label="Person (username)")
    action = forms.ChoiceField(
        required=False, choices=[("", "any action"), *AuditEntry.Action.choices]
    )
    since = forms.DateField(required=False, input_formats=["%Y-%m-%d"], widget=DAY)
    until = forms.DateField(required=False, input_formats=["%Y-%m-%d"], widget=DAY)
    before = forms.IntegerField(required=False, min_value=1, max_value=2**63 - 1)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        since, until = data.get("since"), data.get("until")
        if since and until and until < since:
            self.add_error("until", f"“until” ({until}) is before “since” ({since}).")
        return data


@dataclass
class AuditPage:
    entries: list[AuditEntry]
    # The cursor of the next (older) page; None on the last page.
    older: int | None


def _day_start(day: Any) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


def audit_entries(
    *,
    actor: str = "",
    action: str = "",
    since: Any = None,
    until: Any = None,
    before: int | None = None,
    limit: int = PAGE,
) -> AuditPage:
    """One page of entries, newest first, matching every filter given (dates inclusive,
    in the console's time zone). One query: limit + 1 rows tell whether more follow."""
    entries: QuerySet[AuditEntry] = AuditEntry.objects.order_by("-id")
    if actor:
        # The copied username: an entry still matches after its account is deleted.
        entries = entries.filter(actor_username=actor)
    if action:
        entries = entries.filter(action=action)
    if since:
        entries = entries.filter(at__gte=_day_start(since))
    if until:
        entries = entries.filter(at__lt=_day_start(until + timedelta(days=1)))
    if before:
        entries = entries.filter(id__lt=before)
    rows = list(entries[: limit + 1])
    older = rows[limit - 1].pk if len(rows) > limit else None
    return AuditPage(rows[:limit], older)
