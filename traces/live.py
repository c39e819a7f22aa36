"""Live run pages (toolops/live.py): with REDIS_URL set, a change to a run — a call
claimed, held, recorded, reconciled, settled or decided on, the run ending — is pushed to
the run's open pages, which fetch their live region again; without it they poll."""

from __future__ import annotations

from toolops import live


def run_group(run_pk: int) -> str:
    """The Channels group of one run's open pages."""
    return f"run-{run_pk}"


def run_push_path(run_pk: int) -> str:
    """The WebSocket a run's page listens on (traces/routing.py)."""
    return f"/ws/runs/{run_pk}/"


def run_changed(*, run_pk: int) -> None:
    """Tell the run's open pages that it changed, once the change is committed. Costs
    nothing without REDIS_URL (the pages poll)."""
    live.changed(group=run_group(run_pk), item=run_pk)
