"""The scripted demo agent: realistic runs through the real executor API, over HTTP.

It is what an agent framework would be, minus the model: it opens runs, sends tool
calls, reads ToolOps' answers (status, feedback, attempts, replayed) and ends its runs.
Each scenario uses the demo shop's fault-injection API (``/_shop/faults``) to create
the condition it shows — a lost response, a hanging payment service, a flaky or
rate-limited read, a refund service that is down — and clears the fault afterwards,
whatever happens. The scenarios live by theme: resilience.py (downstreams that
misbehave), saga.py (abort, and the undos after it), approvals.py (calls a person
decides), observe.py (what people see of a run: redaction, metrics), spend.py (the
agent policy's daily limit, met by a second demo agent); the two HTTP clients in
clients.py; what a scenario is written with in
scenario.py. This module lists them, runs them and prints one line each.

create_order and charge wait for a reviewer. The resilience scenarios' runs carry the
metadata ``{"demo_reviewer": "auto"}``: the demo's scripted reviewer (reviewer.py, a
process `manage.py demo` starts) approves their calls, and the scenario long-polls the
call until the worker has run it. The approval scenarios leave their calls to a person,
and a watcher thread prints each one's outcome (``↳ …``) when it is decided.

    python -m toolops.demo.agent --url http://127.0.0.1:8000 --token TOKEN \
        --shop http://127.0.0.1:9000

The token may also come from the ``TOOLOPS_AGENT_TOKEN`` environment variable; given
neither, it is the demo agent's, read from the demo's logins file (logins.py), so that
`manage.py demo` prints it only once, when it is made. demo-cashier's token (the daily
limit scenario) comes the same way: ``--cashier-token``, ``TOOLOPS_CASHIER_TOKEN``, or
the logins file. Exit code
0 when every scenario ended as expected; one line per scenario, then a total. With
``--watch`` it then stays until every call left to a person is decided (Ctrl-C to stop).
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TextIO

from toolops.demo.approvals import approval_expires, charge_waits, possible_duplicate
from toolops.demo.clients import ShopControl, ToolOps
from toolops.demo.logins import CASHIER_KEY, agent_token, default_path
from toolops.demo.observe import metrics, sensitive_data
from toolops.demo.partial import degraded_search, dependency, partial_summary
from toolops.demo.resilience import (
    bad_input,
    budget,
    charge_timeout,
    circuit_breaker,
    flaky_read,
    happy_path,
    lost_response,
    rate_limited,
    replay,
    unknown_charge,
)
from toolops.demo.saga import abort, dead_letter, saga_abort
from toolops.demo.scenario import (
    Demo,
    Outcome,
    plural,
)
from toolops.demo.spend import daily_limit

Scenario = Callable[[Demo], Outcome]
SCENARIOS: list[tuple[str, Scenario]] = [
    ("happy-path order", happy_path),
    ("lost response", lost_response),
    ("charge timeout", charge_timeout),
    ("flaky read", flaky_read),
    ("rate-limited read", rate_limited),
    ("replay", replay),
    ("bad input", bad_input),
    ("budget", budget),
    ("abort", abort),
    ("saga abort", saga_abort),
    ("dead letter", dead_letter),
    ("charge waits for a reviewer", charge_waits),
    ("possible duplicate", possible_duplicate),
    ("approval expires", approval_expires),
    ("dependency", dependency),
    ("circuit breaker", circuit_breaker),
    ("unknown charge", unknown_charge),
    ("degraded search", degraded_search),
    ("partial summary", partial_summary),
    ("sensitive data", sensitive_data),
    ("metrics", metrics),
    ("daily limit", daily_limit),
]


# --- running them -------------------------------------------------------------------------


@dataclass
class ScenarioResult:
    name: str
    ok: bool
    text: str
    run_ids: list[str] = field(default_factory=list)
    seconds: float = 0.0


def run_scenario(demo: Demo, name: str, scenario: Scenario) -> ScenarioResult:
    """One scenario; an exception is reported as its outcome, never raised."""
    first_run = len(demo.run_ids)
    started = time.monotonic()
    try:
        outcome = scenario(demo)
    except Exception as exc:
        outcome = Outcome(False, f"{type(exc).__name__}: {exc}")
    return ScenarioResult(
        name=name,
        ok=outcome.ok,
        text=outcome.text,
        run_ids=demo.run_ids[first_run:],
        seconds=time.monotonic() - started,
    )


def new_stamp() -> str:
    """Unique per demo run: a timestamp, plus a few random characters for the same second."""
    return f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(2)}"


_emitting = threading.Lock()


class Out(Protocol):
    """Where the demo prints: a text stream, or a management command's OutputWrapper."""

    def write(self, text: str, /) -> object: ...
    def flush(self) -> object: ...


def emit(out: Out, line: str) -> None:
    # One write with its newline: Django's OutputWrapper would add a second one. The lock:
    # the approval watchers write from their own threads.
    with _emitting:
        out.write(line + "\n")
        out.flush()


def run_demo(
    url: str,
    token: str,
    shop_url: str,
    *,
    out: Out = sys.stdout,
    only: list[str] | None = None,
    watchers: list[threading.Thread] | None = None,
    cashier_token: str = "",
) -> list[ScenarioResult]:
    """Run the scenarios (all, or those named in `only`), printing one line each. The
    threads watching calls left to a person are appended to `watchers`; they print
    their outcome to `out` later, while the process lives. `cashier_token`:
    demo-cashier's, for the daily-limit scenario (without it, that scenario says so)."""
    api, shop = ToolOps(url, token), ShopControl(shop_url)
    cashier = ToolOps(url, cashier_token) if cashier_token else None
    demo = Demo(api, shop, new_stamp(), report=lambda line: emit(out, line), cashier=cashier)
    results: list[ScenarioResult] = []
    try:
        warning = demo.pick_sku()
        if warning:
            emit(out, f"! {warning}")
        for name, scenario in SCENARIOS:
            if only and name not in only and scenario.__name__ not in only:
                continue
            result = run_scenario(demo, name, scenario)
            mark = "✓" if result.ok else "✗"
            emit(out, f"{mark} {name}: {result.text}")
            results.append(result)
    finally:
        api.close()
        shop.close()
        if cashier is not None:
            cashier.close()
        if watchers is not None:
            watchers.extend(demo.watchers)
    ok = sum(r.ok for r in results)
    emit(out, f"demo agent: {len(results)} scenarios, {ok} ok")
    return results


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m toolops.demo.agent",
        description="Scripted demo agent: drives the ToolOps executor API over HTTP.",
    )
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="ToolOps base URL")
    parser.add_argument(
        "--token",
        default=os.environ.get("TOOLOPS_AGENT_TOKEN", ""),
        help="agent token (default: $TOOLOPS_AGENT_TOKEN, else the demo agent's in --logins)",
    )
    parser.add_argument(
        "--logins",
        type=Path,
        default=default_path(),
        help="the demo's logins file, read for the token when none is given "
        "(default: $TOOLOPS_DATA_DIR/demo-logins.txt, else var/demo-logins.txt)",
    )
    parser.add_argument(
        "--cashier-token",
        default=os.environ.get("TOOLOPS_CASHIER_TOKEN", ""),
        help="demo-cashier's token, for the daily-limit scenario (default: "
        "$TOOLOPS_CASHIER_TOKEN, else the one in --logins)",
    )
    parser.add_argument("--shop", default="http://127.0.0.1:9000", help="demo shop base URL")
    parser.add_argument(
        "--only",
        action="append",
        metavar="SCENARIO",
        help="run only this scenario (its name or function name); repeatable",
    )
    parser.add_argument(
        "--watch",
        action="store_true",
        help="then wait until every call left to a reviewer is decided, printing each",
    )
    args = parser.parse_args(argv)
    args.token = args.token or agent_token(args.logins)
    args.cashier_token = args.cashier_token or agent_token(args.logins, CASHIER_KEY)
    if not args.token:
        parser.error(
            f"an agent token is required: --token, $TOOLOPS_AGENT_TOKEN, or the demo's "
            f"logins file (none at {args.logins}: has `manage.py demo` run here?)"
        )
    return args


def main(argv: list[str] | None = None, out: TextIO = sys.stdout) -> int:
    args = _parse_args(argv)
    watchers: list[threading.Thread] = []
    results = run_demo(
        args.url,
        args.token,
        args.shop,
        out=out,
        only=args.only,
        watchers=watchers,
        cashier_token=args.cashier_token,
    )
    if args.watch and watchers:
        emit(
            out,
            f"waiting for reviewers to decide {plural(len(watchers), 'call')} (Ctrl-C to stop)…",
        )
        try:
            for thread in watchers:
                while thread.is_alive():
                    thread.join(0.5)  # in slices: Ctrl-C must still reach us
        except KeyboardInterrupt:
            pass
    return 0 if results and all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
