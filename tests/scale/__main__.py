"""`python -m tests.scale --seconds 60`: the production topology on this machine —
HAProxy in front of 3 uvicorn web processes, 3 Celery workers and beat on a Redis of its
own, PostgreSQL behind pgbouncer in transaction mode, the demo shop — under a bounded
mixed load through the balancer only: agents with duplicates and lost answers, approvals
decided by a scripted reviewer, aborts with compensations, a breaker opening, MCP
clients. Then the figures (calls/s, p50/p99 per kind, each process's memory) and the
chaos checker's invariants. Exit status 1 on a violation, 2 when the run itself broke."""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import sys
import threading
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from tests.chaos import quiesce, runner
from tests.chaos.checker import check_each
from tests.chaos.history import History
from tests.chaos.stack import REVIEWER
from tests.chaos.workload import Agent, Reviewer
from tests.scale import figures
from tests.scale.load import BREAKER_PATH, BreakerAgent, McpClient
from tests.scale.stack import DB_NAME, ScaleStack

RETRY_AFTER_END_S = 60.0
LOST_ANSWERS = 0.1  # the share of an agent's calls whose answer it does not wait for
MCP_CLIENTS = 2


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.scale", description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the load")
    parser.add_argument("--seed", type=int, default=None, help="the clients' seed")
    runner.add_run_arguments(parser, DB_NAME)
    return runner.checked(parser, parser.parse_args(argv))


def say(text: str) -> None:
    print(f"[scale {time.strftime('%H:%M:%S')}] {text}", flush=True)


def clients(stack: ScaleStack, history: History, seed: int, stop: threading.Event) -> dict:
    from toolops.services import agent_create

    urls, approvals = [stack.url], queue.Queue()
    rng = lambda i: random.Random(seed * 100 + i)  # noqa: E731
    agents: list[Any] = []
    for i, token in enumerate(stack.tokens):
        agent = Agent(f"a{i + 1}", history, urls, rng(i), stop, token=token, approvals=approvals)
        agent.lost_answers = LOST_ANSWERS
        agents.append(agent)
    token = agent_create(name="scale-breaker")[1]
    breaker = BreakerAgent(
        "breaker", history, urls, rng(50), stop, token=token, approvals=approvals
    )
    mcp = [
        McpClient(
            f"mcp{i + 1}",
            history,
            urls,
            rng(60 + i),
            stop,
            token=agent_create(name=f"scale-mcp-{i + 1}")[1],
        )
        for i in range(MCP_CLIENTS)
    ]
    reviewer = Reviewer(
        "reviewer",
        history,
        urls,
        rng(99),
        stop,
        username=REVIEWER,
        password=stack.reviewer_password,
        approvals=approvals,
    )
    return {"agents": agents, "breaker": breaker, "mcp": mcp, "reviewer": reviewer}


def shop_fault(stack: ScaleStack, **fault: Any) -> None:
    body = {"path": BREAKER_PATH, **fault}
    httpx.post(f"{stack.shop_direct}/_shop/faults", json=body).raise_for_status()


def load(args: argparse.Namespace, stack: ScaleStack, history: History) -> dict[str, Any]:
    """The load for --seconds, then the clients' retries; the figures taken at its end."""
    stop, agents_done = threading.Event(), threading.Event()
    who = clients(stack, history, args.seed, stop)
    workers = [*who["agents"], who["breaker"], *who["mcp"]]
    shop_fault(stack, error_rate=1.0, fail_status=503)  # the breaker's downstream fails
    threads = [threading.Thread(target=c.loop, name=c.name, daemon=True) for c in workers]
    review = threading.Thread(target=who["reviewer"].loop, args=(agents_done,), daemon=True)
    started = time.monotonic()
    for t in (*threads, review):
        t.start()
    runner.load_for(args.seconds, threads)
    ended = time.monotonic()
    say("load stops; clients finish what they started")
    stop.set()
    pids = {name: p.proc.pid if p.proc else None for name, p in stack.procs.items()}
    memory = figures.memory({**pids, "runner (and the shop)": os.getpid()}, alone=os.getpid())
    runner.wind_down((*workers, who["reviewer"]), threads, review, agents_done, RETRY_AFTER_END_S)
    shop_fault(stack)
    assert stack.balancer is not None
    calls = figures.answered_calls(history, started, ended)
    return {
        "seconds": args.seconds,
        "calls": calls,
        "calls_per_s": round(calls / (ended - started), 1),
        "requests_per_s": round(
            sum(1 for o in history.ops if o.type != "invoke" and started <= o.time <= ended)
            / (ended - started),
            1,
        ),
        "latency": figures.latency_table(history),
        "memory": memory,
        "balancer": stack.balancer.stats(),
        "breaker": {"refused": who["breaker"].refused, "failed": who["breaker"].failed},
        "mcp": {"sessions lost to another process": sum(c.lost_sessions for c in who["mcp"])},
        "reviewer": who["reviewer"],
    }


def run(args: argparse.Namespace, stack: ScaleStack, history: History) -> dict[str, Any]:
    result = load(args, stack, history)
    reviewer = result.pop("reviewer")
    say("clients done; waiting for the stack to go quiet")
    result["quiet"] = quiesce.wait(timeout=180)
    from tests.chaos.gather import gather

    world = gather(stack, history, reviewer)
    found = check_each(world)
    result["violations"] = [v.text() for v in found]
    result["operations"] = sum(1 for o in history.ops if o.type == "invoke")
    result["counts"] = history.counts()
    result["world"] = {
        "runs": len(world.runs),
        "calls": len(world.calls),
        "effects": len(world.effects),
        "call statuses": dict(Counter(c.status for c in world.calls.values())),
        "run statuses": dict(Counter(r.status for r in world.runs.values())),
    }
    lost = result["mcp"]["sessions lost to another process"]
    if lost:
        result["violations"].append(
            f"VIOLATION of MCP sessions shared across processes: {lost} requests for a live "
            "session were answered 404 by a web process that had not opened it"
        )
    if result["breaker"]["refused"] == 0:
        result["violations"].append(
            "VIOLATION of breaker opens: legacy_inventory failed "
            f"{result['breaker']['failed']} times and its breaker never refused a call"
        )
    return result


def report(result: dict[str, Any], workdir: Path) -> None:
    c = result["counts"]
    print(
        f"\nload: {result['seconds']:g} s; tool calls answered: {result['calls']} "
        f"({result['calls_per_s']} calls/s); all requests: {result['requests_per_s']}/s"
    )
    print(
        f"operations: {result['operations']}  ok: {c['ok']}  fail: {c['fail']}  info: {c['info']}"
    )
    print("latency per kind (ms):")
    print(figures.table(result["latency"], ["n", "p50_ms", "p99_ms"]))
    print("memory per process (MiB, at the load's end; peak = VmHWM):")
    print(figures.table(result["memory"], ["rss_mib", "peak_mib", "processes"]))
    print("balancer (HAProxy):")
    rows = {
        k: {
            "status": v["status"],
            "sessions": v["sessions"],
            "2xx": v["responses"]["2xx"],
            "4xx": v["responses"]["4xx"],
            "5xx": v["responses"]["5xx"],
        }
        for k, v in result["balancer"].items()
    }
    print(figures.table(rows, ["status", "sessions", "2xx", "4xx", "5xx"]))
    b = result["breaker"]
    print(f"breaker: legacy_inventory failed {b['failed']} times, refused {b['refused']} times")
    lost = result["mcp"]["sessions lost to another process"]
    print(f"MCP: requests answered 404 for a session opened on another process: {lost}")
    print("checked: " + "; ".join(f"{k}: {v}" for k, v in result["world"].items()))
    if not result["quiet"]:
        print("the stack did not go quiet within the deadline (checked anyway)")
    print("\n".join(result["violations"]) or "invariants: held (0 violations)")
    print(f"logs and history: {workdir}")


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    workdir = runner.begin(args, "scale")
    say(f"seed {args.seed}, {args.seconds:g} s; logs in {workdir}")
    stack, history = ScaleStack(workdir, seed=args.seed, db_name=args.database), History()
    try:
        stack.start()
        say(
            f"stack up: balancer {stack.url} over {', '.join(stack.web_urls)}; "
            f"pgbouncer :{stack.pgbouncer.port}"
        )
        result = run(args, stack, history)
    except KeyboardInterrupt:
        say("interrupted: stopping everything")
        return 130
    except Exception:
        traceback.print_exc()
        say("the run broke (not a violation): see the logs")
        return 2
    finally:
        history.dump(workdir / "history.jsonl")
        stack.stop()
    report(result, workdir)
    (workdir / "summary.json").write_text(json.dumps(result, indent=2, default=str))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))
    return 1 if result["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
