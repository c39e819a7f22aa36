"""MCP sessions' shared records (sync, Django): one McpSession row per live session, so
that every web process serves every session. The database's clock judges idleness, and a
row is deleted when its session ends: the one process whose delete removed it completes
the session's run (calls.session_ended), however many noticed the end at once."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import timedelta
from typing import Any
from uuid import uuid4

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.db.models.functions import Now

from toolops.models import Agent, McpSession

from . import calls

log = logging.getLogger(__name__)
REAP_BATCH = 200


def _cutoff() -> Any:
    """Last seen before this, a session has been idle TOOLOPS_MCP_IDLE_S: it has ended."""
    return Now() - timedelta(seconds=settings.TOOLOPS_MCP_IDLE_S)


def _live() -> QuerySet[McpSession]:
    return McpSession.objects.filter(last_seen_at__gte=_cutoff())


def open_session(*, agent: Agent, cap: int) -> str | None:
    """A new session's id, or None when the agent already has `cap` live sessions (on
    any process). The agent's row is locked while counting, so that two processes
    opening sessions for one agent at once cannot both take the last place."""
    with transaction.atomic():
        Agent.objects.select_for_update(no_key=True).filter(pk=agent.pk).exists()
        if _live().filter(agent=agent).count() >= cap:
            return None
        session_id = uuid4().hex
        McpSession.objects.create(
            session_id=session_id, agent=agent, opened_at=Now(), last_seen_at=Now()
        )
    return session_id


def established(*, session_id: str, protocol_version: str) -> None:
    """The handshake answered: the version it negotiated, for the processes that adopt
    the session before the client names it in a header."""
    McpSession.objects.filter(session_id=session_id).update(protocol_version=protocol_version)


def forget(*, session_id: str) -> None:
    """A session whose opening request was refused: it never was, it had no run."""
    McpSession.objects.filter(session_id=session_id).delete()


def seen(*, session_id: str, agent: Agent) -> bool:
    """True when the session is live and `agent`'s, and marks it seen now; False for an
    ended session, an idle one, an unknown id and another agent's session alike."""
    return _live().filter(session_id=session_id, agent=agent).update(last_seen_at=Now()) == 1


def protocol_version(*, session_id: str) -> str:
    row = McpSession.objects.filter(session_id=session_id).values_list("protocol_version")
    return next(iter(row), ("",))[0]


def still_used(session_ids: Iterable[str]) -> None:
    """Sessions with a request in flight on this process (a call waiting for a reviewer,
    an open GET stream) are in use, not idle: seen now."""
    ids = list(session_ids)
    if ids:
        McpSession.objects.filter(session_id__in=ids).update(last_seen_at=Now())


def end(*, session_id: str, agent_id: int, only_if_idle: bool = False) -> bool:
    """End the session (its client's DELETE; or, `only_if_idle`, when it has been idle
    TOOLOPS_MCP_IDLE_S): True for the one caller whose delete removed the row, which then
    completes the session's run."""
    rows = McpSession.objects.filter(session_id=session_id, agent_id=agent_id)
    if only_if_idle:
        rows = rows.filter(last_seen_at__lt=_cutoff())
    deleted, _ = rows.delete()
    if not deleted:
        return False
    agent = Agent.objects.filter(pk=agent_id).first()
    if agent is not None:
        calls.session_ended(agent=agent, session_id=session_id)
    return True


def reap() -> int:
    """End the sessions idle TOOLOPS_MCP_IDLE_S, whichever process served them (one that
    stopped, or crashed, holding them included). Every web process runs this now and
    then; each session is ended by one of them."""
    idle = McpSession.objects.filter(last_seen_at__lt=_cutoff()).values_list(
        "session_id", "agent_id"
    )[:REAP_BATCH]
    ended = sum(end(session_id=s, agent_id=a, only_if_idle=True) for s, a in list(idle))
    if ended:
        log.info("MCP sessions ended idle: %s", ended)
    return ended
