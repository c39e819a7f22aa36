"""A random fault schedule from a seed, and its player. The same seed gives the same
schedule; every fault heals before the run's end, so that what follows is recovery."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import httpx

from tests.chaos.stack import Stack

PROXY_FAULTS = ("delay", "drop", "reset", "blackhole", "refuse", "half_open")
SHOP_PATHS = (
    "/inventory/reservations",
    "/orders",
    "/payments/charges",
    "/notifications",
    "/inventory/reservations/release",
    "/orders/cancel",
    "/payments/refunds",
)
SHOP_FAULTS = {
    "shop-5xx": {"error_rate": 0.5, "fail_status": 503},
    "shop-slow": {"latency_ms": 2500},
    "shop-lost": {"drop_after_commit": 3},
    "shop-commit-502": {"commit_then_status": 2, "fail_status": 502},
}
# A worker's application clock this far ahead or behind, restarted so for the fault's
# length.
SKEW_S = 5.0
PROCESS_KINDS = ("kill-web", "kill-worker", "kill-beat")


@dataclass
class Fault:
    at: float  # seconds from the start
    lasts: float
    kind: str
    target: str = ""

    def __str__(self) -> str:
        return f"{self.at:6.1f}s +{self.lasts:.1f}s {self.kind} {self.target}"


# Whole services: PostgreSQL restarted (reset, refused 2 s) or out of reach for 30 s;
# Redis restarted (empty) or down for a while (the broker gone while work goes on).
SERVICE_KINDS = ("pg-restart", "pg-outage", "redis-restart", "broker-down")


def schedule(seed: int, seconds: float, *, proxies: bool) -> list[Fault]:
    """Faults over the first 80% of the run, one starting every 2–6 s, each healed by
    then: the rest of the run is recovery with the clients still going."""
    rng = random.Random(seed)
    kinds = [*SHOP_FAULTS, *PROCESS_KINDS, *SERVICE_KINDS, "skew-worker"]
    if proxies:
        kinds += [f"proxy-{f}" for f in PROXY_FAULTS]
    end, at, faults = seconds * 0.8, 3.0, []
    while at < end - 1:
        kind = rng.choice(kinds)
        lasts = min(rng.uniform(1.0, 6.0), end - at)
        target = ""
        if kind.startswith("proxy-"):
            target = rng.choice(["pg", "redis", "shop"])
        elif kind.startswith("shop-"):
            target = rng.choice(SHOP_PATHS)
        elif kind == "skew-worker":
            target = rng.choice(["worker1+", "worker1-", "worker2+", "worker2-"])
        elif kind.startswith("kill-"):
            target = {
                "kill-web": rng.choice(["web1", "web2"]),
                "kill-worker": rng.choice(["worker1", "worker2"]),
                "kill-beat": "beat",
            }[kind]
        if kind == "pg-restart":  # a restart: connections reset, refused for 2 s
            lasts = min(2.0, end - at)
        elif kind == "pg-outage":  # out of reach: taken, never answered
            lasts = min(30.0, end - at)
        elif kind == "broker-down":
            lasts = min(rng.uniform(5.0, 15.0), end - at)
        elif kind == "skew-worker":  # long enough for the worker to start and work
            lasts = min(rng.uniform(10.0, 20.0), end - at)
        faults.append(Fault(round(at, 2), round(lasts, 2), kind, target))
        at += rng.uniform(2.0, 6.0)
    return faults


class Player:
    """Plays a schedule on a stack from a thread of its own; `injected` counts by kind."""

    def __init__(self, stack: Stack, faults: list[Fault], log: Any) -> None:
        self.stack, self.faults, self.log = stack, faults, log
        self.injected: Counter[str] = Counter()
        self.thread = threading.Thread(target=self.play, name="faults", daemon=True)
        self.stop = threading.Event()
        self.active: list[tuple[float, Fault]] = []
        self.exits: Counter[str] = Counter()  # processes that exited by themselves
        self.down: set[str] = set()  # killed by a fault, started again when it heals

    def play(self) -> None:
        start = time.monotonic()
        pending = sorted(self.faults, key=lambda f: f.at)
        while not self.stop.is_set():
            now = time.monotonic() - start
            while pending and pending[0].at <= now:
                fault = pending.pop(0)
                with suppress(Exception):
                    self.inject(fault)
                    self.active.append((fault.at + fault.lasts, fault))
            for due, fault in [a for a in self.active if a[0] <= now]:
                self.active.remove((due, fault))
                self.heal(fault)
            self.watch()
            self.stop.wait(0.1)  # the schedule's tick; ends at once when stopped
        for _, fault in list(self.active):
            self.heal(fault)

    def watch(self) -> None:
        """A process that died by itself is started again at once, as a supervisor
        would: SIGKILLed, it hit a crash point; otherwise it exited (`exits`)."""
        for name, proc in self.stack.procs.items():
            if self.stack.stopping:
                return
            if name not in self.down and name != "redis" and not proc.alive:
                self.log(f"died   {name} ({proc.exit_text}); started again")
                if proc.exit_text == "killed by SIGKILL":
                    self.injected["crash-point"] += 1
                else:
                    self.exits[f"{name} {proc.exit_text}"] += 1
                proc.start()

    def inject(self, fault: Fault) -> None:
        self.log(f"fault  {fault}")
        stack = self.stack
        if fault.kind.startswith("proxy-"):
            proxy = stack.proxies[fault.target]
            name = fault.kind.removeprefix("proxy-")
            args = {"delay": (0.3,), "drop": (0.3,)}.get(name, ())
            getattr(proxy, name)(*args)
        elif fault.kind.startswith("shop-"):
            body = {"path": fault.target, **SHOP_FAULTS[fault.kind]}
            httpx.post(f"{stack.shop_direct}/_shop/faults", json=body).raise_for_status()
        elif fault.kind.startswith("kill-"):
            self.down.add(fault.target)
            stack.procs[fault.target].kill()
        elif fault.kind == "pg-restart" and "pg" in stack.proxies:
            stack.proxies["pg"].reset()
            stack.proxies["pg"].refuse()
        elif fault.kind == "pg-outage" and "pg" in stack.proxies:
            stack.proxies["pg"].blackhole()
        elif fault.kind in ("redis-restart", "broker-down"):
            self.down.add("redis")
            stack.procs["redis"].kill()
        elif fault.kind == "skew-worker":
            name, sign = fault.target[:-1], fault.target[-1]
            self.down.add(name)
            stack.skew(name, SKEW_S if sign == "+" else -SKEW_S)
        self.injected[fault.kind] += 1

    def heal(self, fault: Fault) -> None:
        self.log(f"heal   {fault}")
        stack = self.stack
        with suppress(Exception):
            if fault.kind.startswith("proxy-") or fault.kind in ("pg-restart", "pg-outage"):
                proxy = stack.proxies.get(fault.target or "pg")
                if proxy is not None:
                    proxy.heal()
                    if fault.kind == "proxy-half_open":
                        # What it swallowed is lost: its connections would wait forever,
                        # as TCP keepalive would eventually find; end them now.
                        proxy.reset()
            elif fault.kind.startswith("shop-"):
                httpx.post(f"{stack.shop_direct}/_shop/faults", json={"path": fault.target})
            elif fault.kind == "skew-worker":
                stack.skew(fault.target[:-1], None)
            elif fault.kind.startswith("kill-") or fault.kind in ("redis-restart", "broker-down"):
                stack.start_again(fault.target or "redis")
        self.down.discard(
            fault.target[:-1] if fault.kind == "skew-worker" else fault.target or "redis"
        )

    def heal_all(self) -> None:
        self.stop.set()
        self.thread.join(30)
        for proxy in self.stack.proxies.values():
            with suppress(Exception):
                proxy.heal()
        for path in SHOP_PATHS:
            with suppress(httpx.HTTPError):
                httpx.post(f"{self.stack.shop_direct}/_shop/faults", json={"path": path})
        self.stack.revive()
        self.stack.calm()
