"""Waking a worker by task name (toolops/queue.py) from a fresh process's many threads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from django.contrib.auth.models import Group
from django.db import transaction

from toolops.queue import enqueue_on_commit

ROOT = Path(__file__).resolve().parents[2]

# A fresh process, as a new web server is: sixteen request threads look up a task at once,
# before anything imported the tasks modules.
RACE = """
import os, threading
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolops.settings")
import django
django.setup()
from toolops import queue
names = [queue.NOTIFY_EVENT, queue.COMPENSATE_RUN, queue.EXECUTE_APPROVED_CALL] * 6
start, found, failed = threading.Barrier(len(names)), [], []
def look(name):
    start.wait()
    try:
        found.append(queue.task(name).name)
    except Exception as exc:
        failed.append(repr(exc))
threads = [threading.Thread(target=look, args=(n,)) for n in names]
for t in threads: t.start()
for t in threads: t.join()
print(len(found), failed)
"""


def test_many_threads_of_a_fresh_process_all_find_their_task() -> None:
    for _ in range(3):
        done = subprocess.run(
            [sys.executable, "-c", RACE], cwd=ROOT, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "18 []", done.stdout + done.stderr


def test_a_wake_that_cannot_be_sent_is_not_raised_into_the_committed_request(
    transactional_db: None,
) -> None:
    with transaction.atomic():
        Group.objects.create(name="committed")
        enqueue_on_commit("toolops.tasks.no_such_task", 1)  # logged by Django, not raised

    assert Group.objects.filter(name="committed").exists()
