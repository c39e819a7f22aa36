"""Who is told what. Each group has its kinds (reviewers: approvals; support: tickets;
operators: breakers); a person gets their groups' kinds by e-mail unless they turned a
kind off on their profile page. Superusers get nothing unless they turn a kind on: they
may do anything, and would otherwise be told everything. Each group's webhooks (settings:
TOOLOPS_WEBHOOK_<GROUP>_URL/_SECRET, and those added in the console) get its kinds."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q

from toolops.notify import hooks
from toolops.notify.models import Kind, NotificationPreference
from toolops.permissions import OPERATORS, REVIEWERS, SUPPORT, group_names

GROUP_KINDS: dict[str, tuple[str, ...]] = {
    REVIEWERS: (Kind.APPROVAL_WAITING, Kind.APPROVAL_EXPIRING),
    SUPPORT: (Kind.TICKET_OPENED, Kind.TICKET_UNASSIGNED),
    OPERATORS: (Kind.BREAKER_OPENED,),
}


def group_of(kind: str) -> str:
    return next(group for group, kinds in GROUP_KINDS.items() if kind in kinds)


def kinds_for(user: Any) -> list[str]:
    """The kinds a person may receive, in the order of Kind."""
    if user.is_superuser:
        return list(Kind.values)
    theirs = {k for group in group_names(user) for k in GROUP_KINDS.get(group, ())}
    return [k for k in Kind.values if k in theirs]


def defaults_for(user: Any) -> set[str]:
    return {k for group in group_names(user) for k in GROUP_KINDS.get(group, ())}


def email_choices(user: Any) -> dict[str, bool]:
    """kind → whether it reaches this person by e-mail now."""
    chosen = dict(NotificationPreference.objects.filter(user=user).values_list("kind", "email"))
    on = defaults_for(user)
    return {kind: chosen.get(kind, kind in on) for kind in kinds_for(user)}


def email_choices_save(*, user: Any, kinds_on: Iterable[str]) -> None:
    """Keep a choice for every kind the person may receive (the rest stays the default)."""
    wanted = set(kinds_on)
    with transaction.atomic():
        for kind in kinds_for(user):
            NotificationPreference.objects.update_or_create(
                user=user, kind=kind, defaults={"email": kind in wanted}
            )


def email_recipients(kind: str) -> list[tuple[Any, str]]:
    """(user, address) of everyone this kind reaches by e-mail: active, with an address,
    in the kind's group (or a superuser) and not opted out (superusers: opted in)."""
    group = group_of(kind)
    prefs = dict(NotificationPreference.objects.filter(kind=kind).values_list("user_id", "email"))
    model = get_user_model()
    in_group = set(model.objects.filter(groups__name=group).values_list("pk", flat=True))
    users = (
        model.objects.filter(Q(groups__name=group) | Q(is_superuser=True), is_active=True)
        .exclude(email="")
        .distinct()
        .order_by("pk")
    )
    chosen = []
    for user in users:
        if prefs.get(user.pk, user.pk in in_group):
            chosen.append((user, user.email))
    return chosen


def webhooks_for(kind: str) -> list[str]:
    """The webhook targets this kind goes to: its group's environment webhook, when set,
    and the group's webhooks added in the console (toolops/notify/hooks.py)."""
    return hooks.targets_for(group_of(kind))
