"""The audit log's one table. An entry is never edited or deleted: save() of an existing
row and delete() raise here, and on PostgreSQL a trigger (migration 0012) refuses UPDATE
and DELETE from any client, raw SQL included.

An entry names its object as text (type, id, console link), never by a foreign key to a
run or a call: retention deletes those, and the entry must outlive them. It names its
person twice: a nullable foreign key (SET_NULL, the one UPDATE the trigger lets through)
and the username and display name copied when it was written, so it still says who after
the account is gone."""

from __future__ import annotations

from typing import Any, NoReturn

from django.conf import settings
from django.db import models
from django.db.models.functions import Now


class AppendOnly(Exception):
    """An attempt to edit or delete an audit entry."""


class AuditQuerySet(models.QuerySet["AuditEntry"]):
    def update(self, **kwargs: Any) -> NoReturn:
        raise AppendOnly("Audit entries are never edited.")

    def delete(self) -> NoReturn:
        raise AppendOnly("Audit entries are never deleted.")


class AuditEntry(models.Model):
    class Action(models.TextChoices):
        # API.md's list, in its order.
        APPROVAL_DECIDE = "approval.decide", "decide an approval"
        RUN_ABORT = "run.abort", "abort a run"
        CALL_SETTLE = "call.settle", "settle an unknown outcome"
        TICKET_ASSIGN = "ticket.assign", "assign a ticket"
        TICKET_COMMENT = "ticket.comment", "comment on a ticket"
        TICKET_RETRY = "ticket.retry", "retry a ticket"
        TICKET_RESOLVE = "ticket.resolve", "resolve a ticket"
        BREAKER_FORCE_OPEN = "breaker.force_open", "force a breaker open"
        BREAKER_RESET = "breaker.reset", "reset a breaker"
        POLICY_EDIT = "policy.edit", "edit a tool policy"
        FULL_ARGS_READ = "full_args.read", "read full args"
        TOKEN_CREATE = "token.create", "create an agent token"
        TOKEN_ROTATE = "token.rotate", "rotate an agent token"
        TOKEN_REVOKE = "token.revoke", "revoke an agent token"
        LOGIN_LOCKOUT = "login.lockout", "login locked out"
        LOGIN_UNLOCK = "login.unlock", "unlock a login"
        # Beyond API.md's list: an operator's change of an agent's rate limit.
        AGENT_RATE_LIMIT = "agent.rate_limit", "change an agent's rate limit"
        # Beyond API.md's list: support puts a ticket aside until a time, or back.
        TICKET_SNOOZE = "ticket.snooze", "snooze a ticket"
        # Beyond API.md's list: an operator's webhooks (toolops/notify/hook_admin.py).
        WEBHOOK_ADD = "webhook.add", "add a webhook"
        WEBHOOK_TEST = "webhook.test", "send a test to a webhook"
        WEBHOOK_REMOVE = "webhook.remove", "remove a webhook"
        # The agent policy (API.md "Agent policy"): each apply, rollback, and a second
        # operator's confirmation (or withdrawal) of a proposed version.
        POLICY_APPLY = "policy.apply", "apply an agent policy"
        POLICY_ROLLBACK = "policy.rollback", "roll back the agent policy"
        POLICY_PROPOSE = "policy.propose", "propose an agent policy"
        POLICY_CONFIRM = "policy.confirm", "confirm an agent policy"
        POLICY_WITHDRAW = "policy.withdraw", "withdraw a proposed agent policy"

    # SET_NULL: deleting a user keeps their entries (the copied names below say who).
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    actor_username = models.CharField(max_length=150, blank=True, default="")
    actor_name = models.CharField(max_length=300, blank=True, default="")
    action = models.CharField(max_length=32, choices=Action.choices)
    object_type = models.CharField(max_length=32, blank=True, default="")
    object_id = models.CharField(max_length=200, blank=True, default="")
    object_url = models.CharField(max_length=300, blank=True, default="")
    # One line for people (the page's "what"); `detail` holds the same, structured.
    summary = models.TextField(blank=True, default="")
    detail = models.JSONField(default=dict, blank=True)
    address = models.GenericIPAddressField(null=True, blank=True)
    # The database's clock, when the action's statement ran (STATEMENT_TIMESTAMP).
    at = models.DateTimeField(db_default=Now())

    objects = AuditQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "audit entries"
        # The page filters by person or action and pages newest first by id.
        indexes = [
            models.Index(fields=["actor_username", "id"], name="audit_actor_id"),
            models.Index(fields=["action", "id"], name="audit_action_id"),
            models.Index(fields=["at"], name="audit_at"),
        ]

    def __str__(self) -> str:
        who = self.actor_username or "system"
        return f"{who} {self.action} {self.object_type} {self.object_id}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AppendOnly("Audit entries are never edited.")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise AppendOnly("Audit entries are never deleted.")

    @property
    def link(self) -> str:
        """The object's console link, only ever a path on this site (never a scheme)."""
        url = self.object_url
        return url if url.startswith("/") and not url.startswith("//") else ""

    @property
    def actor_gone(self) -> bool:
        """The entry names a person whose account was deleted since."""
        return self.actor_id is None and bool(self.actor_username)
