"""`python -m tests.chaos --seconds 60 --seed 42`: start the stack, run the clients under
a random fault schedule, heal, wait for the stack to go quiet, check the invariants and
print the summary. Exit status 1 on a violation, 2 when the run itself broke."""

from __future__ import annotations

import argparse
import json
import queue
import random
import sys
import threading
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

from tests.chaos import quiesce, runner
from tests.chaos.checker import check_each
from tests.chaos.faults import Player, schedule
from tests.chaos.history import History
from tests.chaos.stack import DB_NAME, REVIEWER, Stack
from tests.chaos.workload import Agent, Reviewer

# Retries of indeterminate operations go on this long after the faults healed.
RETRY_AFTER_END_S = 90.0


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    parser.add_argument("--seconds", type=float, default=120.0, help="length of the workload")
    parser.add_argument("--seed", type=int, default=None, help="the fault schedule's seed")
    parser.add_argument("--no-faults", action="store_true", help="the workload alone")
    parser.add_argument(
        "--no-crash-points",
        action="store_true",
        help="start no process with TOOLOPS_CRASH_AT (named crash points)",
    )
    runner.add_run_arguments(parser, DB_NAME)
    return runner.checked(parser, parser.parse_args(argv))


def say(text: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {text}", flush=True)


def clients(
    stack: Stack, history: History, seed: int, stop: threading.Event
) -> tuple[list[Agent], Reviewer]:
    approvals: queue.Queue[Any] = queue.Queue()
    agents = [
        Agent(
            f"a{i + 1}",
            history,
            stack.web_urls,
            random.Random(seed * 100 + i),
            stop,
            token=token,
            approvals=approvals,
        )
        for i, token in enumerate(stack.tokens)
    ]
    reviewer = Reviewer(
        "reviewer",
        history,
        stack.web_urls,
        random.Random(seed),
        stop,
        username=REVIEWER,
        password=stack.reviewer_password,
        approvals=approvals,
    )
    return agents, reviewer


def run(args: argparse.Namespace, stack: Stack, history: History) -> dict[str, Any]:
    stop, agents_done = threading.Event(), threading.Event()
    agents, reviewer = clients(stack, history, args.seed, stop)
    faults = (
        [] if args.no_faults else schedule(args.seed, args.seconds, proxies=bool(stack.proxies))
    )
    player = Player(stack, faults, say)
    threads = [threading.Thread(target=a.loop, name=a.name, daemon=True) for a in agents]
    review = threading.Thread(target=reviewer.loop, args=(agents_done,), daemon=True)
    for t in (*threads, review):
        t.start()
    player.thread.start()
    runner.load_for(args.seconds, threads)
    say("workload stops; faults heal")
    player.heal_all()
    stop.set()
    runner.wind_down((*agents, reviewer), threads, review, agents_done, RETRY_AFTER_END_S)
    say("clients done; waiting for the stack to go quiet")
    quiet = quiesce.wait(timeout=180)
    from tests.chaos.gather import gather

    world = gather(stack, history, reviewer)
    found = check_each(world)
    result = summary(args, history, player, found[0] if found else None, quiet)
    result["also broken"] = [v.text().splitlines()[0] for v in found[1:]]
    result["world"] = {
        "runs": len(world.runs),
        "calls": len(world.calls),
        "effects": len(world.effects),
        "call statuses": dict(Counter(c.status for c in world.calls.values())),
        "run statuses": dict(Counter(r.status for r in world.runs.values())),
    }
    return result


def summary(
    args: argparse.Namespace, history: History, player: Player, violation: Any, quiet: bool
) -> dict[str, Any]:
    return {
        "seed": args.seed,
        "seconds": args.seconds,
        "operations": sum(1 for o in history.ops if o.type == "invoke"),
        "counts": history.counts(),
        "faults": dict(player.injected),
        "exits": dict(player.exits),
        "quiet": quiet,
        "violation": violation.text() if violation else None,
    }


def report(result: dict[str, Any], workdir: Path) -> None:
    c = result["counts"]
    print(
        f"\noperations: {result['operations']}  ok: {c['ok']}  fail: {c['fail']}  info: {c['info']}"
    )
    faults = ", ".join(f"{k} ×{n}" for k, n in sorted(result["faults"].items())) or "none"
    print(f"faults injected: {faults}")
    if result["exits"]:
        exits = ", ".join(f"{k} ×{n}" for k, n in sorted(result["exits"].items()))
        print(f"processes that exited by themselves (started again): {exits}")
    print("checked: " + "; ".join(f"{k}: {v}" for k, v in result["world"].items()))
    if not result["quiet"]:
        print("the stack did not go quiet within the deadline (checked anyway)")
    print(result["violation"] or "invariants: held")
    for line in result["also broken"]:
        print(f"also: {line}")
    print(f"logs and history: {workdir}")
    print(f"replay: make chaos SECONDS={result['seconds']:g} SEED={result['seed']}")


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    workdir = runner.begin(args, "chaos")
    say(f"seed {args.seed}, {args.seconds:g} s; logs in {workdir}")
    crash = not (args.no_faults or args.no_crash_points)
    stack = Stack(workdir, seed=args.seed, db_name=args.database, crash_points=crash)
    history = History()
    try:
        stack.start()
        say(f"stack up: web {', '.join(stack.web_urls)}; proxies {sorted(stack.proxies) or 'none'}")
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
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 1 if result["violation"] else 0


if __name__ == "__main__":
    sys.exit(main())
