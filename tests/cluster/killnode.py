"""`python -m tests.cluster.killnode --database NAME --json FILE`: kill a node (issue 19,
item 3). Three web processes behind HAProxy, two workers and beat; agents and a reviewer
(tests/chaos/workload.py) work through the balancer. Mid-load, one web process and one
worker holding claims are SIGKILLed together; then they are started again. Writes what
it saw as JSON: the balancer's view of the dead process (DOWN, then UP again), every
client request invoked after the balancer marked it DOWN that failed, the dead worker's
claims and how they ended, and the chaos checker's verdict on the whole history.

A process of its own (not a pytest fixture): the checker reads the stack's database
through Django's ORM, configured here for that database (tests/chaos/setup_db.py)."""

from __future__ import annotations

import argparse
import json
import queue
import random
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.chaos import quiesce, runner
from tests.chaos.checker import check_each
from tests.chaos.history import FAIL, INFO, INVOKE, History
from tests.chaos.stack import REVIEWER, wait_for
from tests.chaos.workload import Agent, Reviewer
from tests.cluster.topology import Cluster
from toolops.demo.shop.faults import Fault

# The workers' downstream writes (held calls run after approval) answer slowly, so that
# a worker holds claims for a while: the one killed dies holding some.
SLOW_PATHS = ("/orders", "/payments/charges")
SLOW_MS = 1500
# Sweeps of stale claims every 3 s (the lease is 5 s: tests/chaos/stack.py TIMINGS).
CLAIM_SWEEP_S = "3"
KILLED_WEB, KILLED_WORKER = "web2", "worker1"
RETRY_AFTER_END_S = 60.0


def say(text: str) -> None:
    print(f"[killnode {time.strftime('%H:%M:%S')}] {text}", flush=True)


def clients(
    cluster: Cluster, history: History, stop: threading.Event
) -> tuple[list[Agent], Reviewer]:
    approvals: queue.Queue[Any] = queue.Queue()
    urls = [cluster.url]  # everything through the balancer
    agents = [
        Agent(
            f"a{i + 1}",
            history,
            urls,
            random.Random(100 + i),
            stop,
            token=token,
            approvals=approvals,
        )
        for i, token in enumerate(cluster.stack.tokens)
    ]
    _, password = cluster.reviewer
    reviewer = Reviewer(
        "reviewer",
        history,
        urls,
        random.Random(1),
        stop,
        username=REVIEWER,
        password=password,
        approvals=approvals,
    )
    return agents, reviewer


def ok_count(history: History) -> int:
    return sum(1 for op in history.ops if op.type == "ok")


def held_by(worker: str) -> list[str]:
    """The claim keys of the calls `worker` is running now (Celery's view of its active
    tasks, joined to the calls and their open claims)."""
    from toolops.celery import app
    from toolops.models import IdempotencyRecord, ToolCall

    active = app.control.inspect(destination=[worker], timeout=1.0).active() or {}
    approvals = [
        task["args"][0]
        for task in active.get(worker, [])
        if task.get("name", "").endswith("execute_approved_call") and task.get("args")
    ]
    call_ids = ToolCall.objects.filter(approval__pk__in=approvals).values_list("call_id", flat=True)
    return list(
        IdempotencyRecord.objects.filter(call_ref__in=list(call_ids), state="claimed").values_list(
            "key", flat=True
        )
    )


def worker_name() -> str:
    """The killed worker's Celery name (tests/chaos/stack.py: chaos<N>@<host>)."""
    return f"chaos{KILLED_WORKER[-1]}@{socket.gethostname()}"


def answers_ping(worker: str) -> bool:
    from toolops.celery import app

    return bool(app.control.ping(destination=[worker], timeout=1.0))


def kill_holding(cluster: Cluster) -> list[str]:
    """SIGKILL the worker once it holds claims, and the web process with it; the claims."""
    worker = worker_name()
    deadline = time.monotonic() + 90
    held: list[str] = []
    while not held and time.monotonic() < deadline:
        held = held_by(worker)
    if not held:
        raise RuntimeError(f"{worker} held no claim within 90 s: the load is too light")
    cluster.stack.procs[KILLED_WORKER].kill()
    cluster.stack.procs[KILLED_WEB].kill()
    return held


def claims(keys: list[str]) -> dict[str, dict[str, Any]]:
    from toolops.models import IdempotencyRecord

    rows = IdempotencyRecord.objects.filter(key__in=keys)
    return {r.key: {"state": r.state, "fence": r.fence, "tool": r.tool} for r in rows}


def failed_after(history: History, since: float) -> list[str]:
    """Requests invoked after `since` (by the monotonic clock) that failed for want of a
    server: an indeterminate answer (5xx, reset, timeout) or a connection refused."""
    invoked = {op.op_id: op for op in history.ops if op.type == INVOKE}
    bad = []
    for op in history.ops:
        start = invoked.get(op.op_id)
        if start is None or op.type == INVOKE or start.time < since:
            continue
        if op.type == INFO or (op.type == FAIL and "error" in (op.value or {})):
            bad.append(op.line())
    return bad


def kill_and_rejoin(cluster: Cluster, history: History, result: dict[str, Any]) -> None:
    balancer = cluster.balancer
    assert balancer is not None
    wait_for(lambda: ok_count(history) >= 40, 120, "the load's first 40 answers")
    held = kill_holding(cluster)
    killed_at = time.monotonic()
    say(f"killed {KILLED_WEB} and {KILLED_WORKER}, which held {len(held)} claim(s)")
    wait_for(lambda: balancer.states().get(KILLED_WEB) == "DOWN", 30, f"{KILLED_WEB} DOWN")
    down_at = time.monotonic()
    result["down_after_s"] = round(down_at - killed_at, 2)
    result["states_while_down"] = balancer.states()
    # The dead worker's claims: swept once their lease ran out, while it is still dead.
    wait_for(
        lambda: all(c["state"] == "recorded" for c in claims(held).values()),
        60,
        "the dead worker's claims swept",
    )
    result["held"] = claims(held)
    oks = ok_count(history)
    wait_for(lambda: ok_count(history) >= oks + 20, 120, "20 more answers with a node down")
    for name in (KILLED_WEB, KILLED_WORKER):
        cluster.stack.start_again(name)
    sessions = balancer.stats()[KILLED_WEB]["sessions"]
    balancer.wait_up(90, [KILLED_WEB])
    result["states_after_restart"] = balancer.states()
    wait_for(lambda: answers_ping(worker_name()), 90, f"{KILLED_WORKER} back")
    result["worker_back"] = True
    # It rejoined: the balancer sends it requests again, and they are answered.
    wait_for(
        lambda: balancer.stats()[KILLED_WEB]["sessions"] >= sessions + 10,
        120,
        f"{KILLED_WEB} serving again",
    )
    result["failed_after_down"] = failed_after(history, down_at)


def run(cluster: Cluster, history: History) -> dict[str, Any]:
    for path in SLOW_PATHS:
        cluster.shop.set_fault(path, Fault(latency_ms=SLOW_MS))
    stop, agents_done = threading.Event(), threading.Event()
    agents, reviewer = clients(cluster, history, stop)
    threads = [threading.Thread(target=a.loop, name=a.name, daemon=True) for a in agents]
    review = threading.Thread(target=reviewer.loop, args=(agents_done,), daemon=True)
    for t in (*threads, review):
        t.start()
    result: dict[str, Any] = {}
    try:
        kill_and_rejoin(cluster, history, result)
    finally:
        stop.set()
        runner.wind_down((*agents, reviewer), threads, review, agents_done, RETRY_AFTER_END_S)
    say("clients done; waiting for the stack to go quiet")
    result["quiet"] = quiesce.wait(timeout=120)
    from tests.chaos.gather import gather

    world = gather(cluster.stack, history, reviewer)
    result["violations"] = [v.text() for v in check_each(world)]
    result["calls"] = len(world.calls)
    result["counts"] = history.counts()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.cluster.killnode", description=__doc__)
    parser.add_argument("--database", required=True, help="the database to create afresh")
    parser.add_argument("--workdir", type=Path, default=None, help="logs and history here")
    parser.add_argument("--json", type=Path, required=True, help="write the result here")
    parser.add_argument("--claim-sweep-s", default=CLAIM_SWEEP_S, help="TOOLOPS_CLAIM_SWEEP_S")
    args = parser.parse_args(argv)
    workdir = runner.begin(args, "killnode")  # Ctrl-C, SIGTERM: every process stopped
    cluster = Cluster(
        workdir,
        db_name=args.database,
        webs=3,
        workers=2,
        env={"TOOLOPS_CLAIM_SWEEP_S": args.claim_sweep_s},
    )
    history = History()
    try:
        cluster.start()
        say(f"up: balancer {cluster.url}; webs {', '.join(cluster.web_urls)}; logs in {workdir}")
        result = run(cluster, history)
    finally:
        history.dump(workdir / "history.jsonl")
        cluster.stop()
    args.json.write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
