"""Applying the agent policy (API.md "Agent policy"): validate, store as a new version,
audit — from `manage.py policy` and from the console alike. A document that does not
validate is refused (PolicyError, naming the table, the entry and the field) and the
active version stays. With `TOOLOPS_POLICY_TWO_PERSON=1` an operator's apply waits as a
proposal until another operator confirms it."""

from __future__ import annotations

import difflib
import hashlib
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from toolops.accounts.models import Agent
from toolops.audit.models import AuditEntry
from toolops.audit.services import Ref, audit_record
from toolops.tools import registry

from . import active, cedar
from .document import Document, PolicyError, parse
from .models import PolicyVersion

Action = AuditEntry.Action
State = PolicyVersion.State
URL = "/console/policy/"


def validate(text: str) -> Document:
    """The document, checked against today's agents and catalog; PolicyError if not."""
    if not text.strip():
        raise PolicyError("the document", "", 'empty: write at least `default = "allow"`')
    tools = registry.public_tools()
    agents = Agent.objects.values_list("name", flat=True)
    document = parse(text, agents=list(agents), tools=[spec.name for spec in tools])
    cedar.check(document, tools)
    return document


def two_person() -> bool:
    return bool(settings.TOOLOPS_POLICY_TWO_PERSON)


def apply(
    text: str,
    *,
    note: str,
    actor: Any = None,
    actor_name: str = "",
    restores: int | None = None,
    request: Any = None,
    propose: bool = False,
) -> PolicyVersion:
    """A new version of `text` (validated first; PolicyError if it does not). In force at
    once, or, with `propose`, waiting for a second operator."""
    validate(text)
    if not note.strip():
        raise PolicyError("the apply", "note", "a note is required: say why the policy changes")
    previous = active_version()
    for _ in range(3):
        try:
            with transaction.atomic():
                number = (PolicyVersion.objects.aggregate(n=Max("number"))["n"] or 0) + 1
                version = PolicyVersion.objects.create(
                    number=number,
                    text=text,
                    digest=hashlib.sha256(text.encode()).hexdigest(),
                    note=note.strip(),
                    restores=restores,
                    state=State.PROPOSED if propose else State.APPLIED,
                    created_by=actor if getattr(actor, "pk", None) else None,
                    created_by_name=actor_name[:150],
                    applied_at=None if propose else timezone.now(),
                )
                action = (
                    Action.POLICY_PROPOSE
                    if propose
                    else Action.POLICY_ROLLBACK
                    if restores is not None
                    else Action.POLICY_APPLY
                )
                _audit(version, action, actor, request, previous)
            active.forget()
            return version
        except IntegrityError:
            continue  # another apply took the number: take the next
    raise RuntimeError("could not number the new policy version")


def rollback(
    number: int,
    *,
    note: str,
    actor: Any = None,
    actor_name: str = "",
    request: Any = None,
    propose: bool = False,
) -> PolicyVersion:
    """A new version equal to version `number` (validated again: the catalog or the
    agents may have changed since); with `propose`, waiting for a second operator like
    any other apply."""
    old = PolicyVersion.objects.filter(number=number).first()
    if old is None:
        raise PolicyError("the rollback", "version", f"there is no version {number}")
    note = note.strip() or f"rollback to v{number}"
    return apply(
        old.text,
        note=note,
        actor=actor,
        actor_name=actor_name,
        restores=number,
        request=request,
        propose=propose,
    )


def confirm(number: int, *, actor: Any, request: Any = None) -> PolicyVersion:
    """A second operator puts a proposed version in force."""
    with transaction.atomic():
        version = PolicyVersion.objects.select_for_update().filter(number=number).first()
        if version is None or version.state != State.PROPOSED:
            raise PolicyError(
                "the confirmation", "version", f"v{number} does not wait for a confirmation"
            )
        if version.created_by_id is not None and version.created_by_id == getattr(
            actor, "pk", None
        ):
            raise PolicyError(
                "the confirmation", "version", "another operator must confirm your own proposal"
            )
        validate(version.text)
        previous = active_version()
        # In force as the newest version: renumbered only when another was applied after
        # it was proposed (its old number then stays free: numbers are never reused).
        newest = PolicyVersion.objects.exclude(pk=version.pk).aggregate(n=Max("number"))["n"] or 0
        if newest > version.number:
            version.number = newest + 1
        version.state, version.confirmed_by, version.applied_at = (
            State.APPLIED,
            actor,
            timezone.now(),
        )
        version.save(update_fields=["number", "state", "confirmed_by", "applied_at"])
        _audit(version, Action.POLICY_CONFIRM, actor, request, previous)
    active.forget()
    return version


def withdraw(number: int, *, actor: Any, request: Any = None) -> PolicyVersion:
    with transaction.atomic():
        version = PolicyVersion.objects.select_for_update().filter(number=number).first()
        if version is None or version.state != State.PROPOSED:
            raise PolicyError("the withdrawal", "version", f"v{number} is not a proposal")
        version.state = State.WITHDRAWN
        version.save(update_fields=["state"])
        _audit(version, Action.POLICY_WITHDRAW, actor, request, None)
    return version


def active_version() -> PolicyVersion | None:
    return PolicyVersion.objects.filter(state=State.APPLIED).order_by("-number").first()


def diff(old: str, new: str, *, old_name: str = "before", new_name: str = "after") -> str:
    """A unified diff, one line per line (a text without a final newline gets one)."""
    lines = difflib.unified_diff(
        old.splitlines(), new.splitlines(), old_name, new_name, lineterm=""
    )
    return "".join(f"{line}\n" for line in lines)


def _audit(
    version: PolicyVersion,
    action: AuditEntry.Action,
    actor: Any,
    request: Any,
    previous: PolicyVersion | None,
) -> None:
    before = previous.text if previous is not None else ""
    name = f"v{previous.number}" if previous is not None else "no policy"
    change = diff(before, version.text, old_name=name, new_name=f"v{version.number}")
    verb = {
        Action.POLICY_APPLY: "applied",
        Action.POLICY_ROLLBACK: "rolled back to",
        Action.POLICY_PROPOSE: "proposed",
        Action.POLICY_CONFIRM: "confirmed",
        Action.POLICY_WITHDRAW: "withdrew",
    }[action]
    restored = f" (v{version.restores})" if version.restores is not None else ""
    audit_record(
        actor=actor,
        action=action,
        request=request,
        obj=Ref(type="policy", id=f"v{version.number}", url=f"{URL}versions/{version.number}/"),
        summary=f"{verb} policy v{version.number}{restored}: {version.note}",
        detail={
            "version": version.number,
            "note": version.note,
            "diff": change[:20000],
            "digest": version.digest,
            "by": version.author,
        },
    )
