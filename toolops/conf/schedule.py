"""Settings: the periodic tasks beat runs — the sweeps that find what a lost message or a
dead process left behind, reconciling unknown outcomes, retention."""

from __future__ import annotations

from toolops.envs import envfloat

CELERY_BEAT_SCHEDULE = {
    # Retention (docs/retention.md): ended runs with their calls and attempts, old attempts,
    # expired idempotency records, replay counts, unused sealed args. Hourly: retention is
    # counted in days, so an hour late is nothing, and each run is capped in time, so a
    # backlog drains over several runs without holding locks for long.
    "purge-traces": {"task": "traces.tasks.purge_traces", "schedule": 3600.0},
    # Unknown outcomes whose query failed: ask again, with backoff per call, until settled.
    # Every 10 s so that a healthy query tool settles a call within ~30 s (API.md).
    "reconcile-unknown-calls": {"task": "toolops.tasks.reconcile_unknown_calls", "schedule": 10.0},
    # Claims whose holder died past its lease (default 30 s): found within a minute.
    "sweep-stale-claims": {
        "task": "toolops.tasks.sweep_stale_claims",
        "schedule": envfloat("TOOLOPS_CLAIM_SWEEP_S", 30.0),
    },
    # Approvals past expires_at end `expired` (API.md: enforced within 60 s), and approved
    # calls whose message was lost are started.
    "sweep-approvals": {
        "task": "toolops.tasks.sweep_approvals",
        "schedule": envfloat("TOOLOPS_APPROVAL_SWEEP_S", 15.0),
    },
    # Compensations a lost message or a dead worker left behind: woken again.
    "sweep-compensations": {
        "task": "compensations.tasks.sweep_compensations",
        "schedule": envfloat("TOOLOPS_COMPENSATION_SWEEP_S", 15.0),
    },
    "abort-idle-runs": {"task": "toolops.tasks.abort_idle_runs", "schedule": 60.0},
    # Approvals about to expire, tickets nobody took, lost messages (toolops/notify/watch.py).
    "notify-sweep": {
        "task": "toolops.notify.tasks.notify_sweep",
        "schedule": envfloat("TOOLOPS_NOTIFY_SWEEP_S", 10.0),
    },
}
