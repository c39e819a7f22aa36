"""Wake a worker once the current transaction commits (the database is the queue: a
message only wakes a worker, and each sweep finds what a lost message left behind).

Tasks are named, not imported: the workflows that enqueue them sit below the task
modules that call them (docs/architecture.md), so the task is found in Celery's own
registry, which imports every app's tasks module on first need (autodiscovery). The
task found is the task object itself: `.delay` is the same as the task module's."""

from __future__ import annotations

import threading
from datetime import datetime

from celery import Task
from django.db import transaction

from toolops.celery import app

# The first lookups in a fresh web process come from many request threads at once: one
# imports the tasks modules, the others wait for it rather than look in a half-filled
# registry (NotRegistered, seen with twelve held MCP calls in a new server).
_IMPORTING = threading.Lock()

COMPENSATE_RUN = "compensations.tasks.compensate_run"
EXECUTE_APPROVED_CALL = "toolops.tasks.execute_approved_call"


def task(name: str) -> Task:
    """The registered task `name`, its module imported by autodiscovery if need be."""
    if name not in app.tasks:
        with _IMPORTING:
            if name not in app.tasks:
                app.loader.import_default_modules()
    return app.tasks[name]


def enqueue_on_commit(name: str, *args: object) -> None:
    """Send `name(*args)` to a worker when the transaction commits (at once outside one).
    A wake that cannot be sent is logged, never raised into the request whose work has
    committed: the periodic sweeps find what a lost message left behind."""
    transaction.on_commit(lambda: task(name).delay(*args), robust=True)


def enqueue_at(name: str, *args: object, at: datetime) -> None:
    """Send `name(*args)` on commit, for a worker to run at `at` (Celery's eta: the worker
    holds the message until then). A lost one is found by the sweeps, as above."""
    transaction.on_commit(lambda: task(name).apply_async(args, eta=at), robust=True)


# Notifications (toolops/notify/): an event recorded → its recipients and message worked
# out; a recipient's due deliveries → one message sent.
NOTIFY_EVENT = "toolops.notify.tasks.notify_event"
NOTIFY_DELIVER = "toolops.notify.tasks.notify_deliver"
