"""The clients of a chaos run: agents using the executor API as API.md says (runs, calls
with their own tool_call_ids, approvals waited for, endings that undo), and a reviewer
deciding in the console. Every request is an operation of the history; an indeterminate
one is retried with the same ids, as a real agent would."""

from __future__ import annotations

import queue
import random
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from tests.chaos.history import FAIL, INFO, OK, History

# What a careless prompt puts in args: the catalog-independent redaction must hide them.
CARD = "4111 1111 1111 1111"
API_KEY = "sk-chaos-5e1f0c9a7b3d2468"
SECRETS = (CARD, CARD.replace(" ", ""), API_KEY)
FINAL = {"succeeded", "degraded", "failed", "unknown", "skipped", "rejected"}
RUN_ENDED = {"completed", "aborted", "compensation_failed", "budget_exhausted"}
BUDGET = {"max_attempts": 20}
REQUEST_TIMEOUT_S = 12.0
POLL_S = 5
# A lost answer (`Client.lost_answers`): the client stops waiting this soon after its
# request went out, as one whose connection dropped, and retries with the same ids.
LOST_ANSWER_S = 0.05


class Client:
    """One process of the history: a thread's own HTTP client over the web servers."""

    def __init__(
        self,
        name: str,
        history: History,
        urls: list[str],
        rng: random.Random,
        stop: threading.Event,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.name, self.history, self.urls, self.rng, self.stop = name, history, urls, rng, stop
        self.http = httpx.Client(timeout=REQUEST_TIMEOUT_S, headers=headers or {})
        # Retries of indeterminate operations go on this long after the workload stops.
        self.give_up_at = float("inf")
        # The share of calls (POST …/calls) whose answer this client does not wait for.
        self.lost_answers = 0.0

    def url(self, path: str) -> str:
        return self.rng.choice(self.urls) + path

    def once(
        self, f: str, key: str, value: Any, send: Callable[[], httpx.Response]
    ) -> tuple[str, Any]:
        op = self.history.invoke(self.name, f, key, value)
        lose = f == "call" and self.lost_answers and self.rng.random() < self.lost_answers
        try:
            if lose:  # this client's http is its thread's own: the timeout is for this send
                self.http.timeout = httpx.Timeout(REQUEST_TIMEOUT_S, read=LOST_ANSWER_S)
            response = send()
        except httpx.ConnectError as exc:  # never reached a server: it did not happen
            self.history.complete(op, FAIL, {"error": type(exc).__name__})
            return FAIL, None
        except httpx.HTTPError as exc:
            self.history.complete(
                op, INFO, {"error": type(exc).__name__, **({"lost": True} if lose else {})}
            )
            return INFO, None
        finally:
            self.http.timeout = httpx.Timeout(REQUEST_TIMEOUT_S)
        code = response.status_code
        if code >= 500:
            self.history.complete(op, INFO, {"status": code})
            return INFO, None
        body = _json(response)
        if code in (200, 201, 202, 302):
            self.history.complete(op, OK, _brief(code, body))
            return OK, body if body is not None else response
        detail = body if isinstance(body, dict) else {}
        self.history.complete(op, FAIL, {"status": code, "detail": detail.get("detail")})
        return FAIL, {**detail, "status": code}

    def settled(
        self, f: str, key: str, value: Any, send: Callable[[], httpx.Response]
    ) -> tuple[str, Any]:
        """Retried while indeterminate (or refused for being busy), with the same ids."""
        pause = 0.2
        while True:
            kind, body = self.once(f, key, value, send)
            retry = kind == INFO or (kind == FAIL and _busy(body))
            if not retry or time.monotonic() > self.give_up_at:
                return kind, body
            time.sleep(pause)
            pause = min(pause * 2, 2.0)


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _busy(body: Any) -> bool:
    """Never reached a server (no body), or a 429: the same request is sent again."""
    return body is None or (isinstance(body, dict) and body.get("status") == 429)


def _brief(code: int, body: Any) -> Any:
    if not isinstance(body, dict):
        return {"status": code}
    keep = ("status", "run_id", "call_id", "attempts", "replayed", "error")
    return {"http": code, **{k: body[k] for k in keep if k in body}}


class Agent(Client):
    """Runs of four steps — reserve, notify, order (approved), charge (approved) — then
    complete or abort; the run's calls are waited for until they are decided."""

    def __init__(self, *args: Any, token: str, approvals: queue.Queue[Any], **kw: Any) -> None:
        super().__init__(*args, headers={"Authorization": f"Bearer {token}"}, **kw)
        self.approvals = approvals
        self.runs: list[str] = []

    def loop(self) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            self.one_run(f"{self.name}-r{n}")

    def one_run(self, run_id: str) -> None:
        kind, _ = self.settled(
            "run",
            run_id,
            {"budget": BUDGET},
            lambda: self.http.post(
                self.url("/api/v1/runs"), json={"run_id": run_id, "budget": BUDGET}
            ),
        )
        if kind != OK:
            return
        self.runs.append(run_id)
        self.call(run_id, 0, "reserve_stock", {"sku": "D9", "qty": 1})
        if self.rng.random() < 0.5:
            message = f"Run {run_id}: card {CARD} was charged; key {API_KEY}"
            self.call(
                run_id,
                1,
                "send_notification",
                {"to": "customer-7", "message": message, "api_key": API_KEY},
            )
        order = self.call(
            run_id,
            2,
            "create_order",
            {"sku": "D9", "qty": 1, "amount": "12.50", "customer": run_id},
        )
        if order and order.get("status") == "succeeded":
            order_id = (order.get("result") or {}).get("order_id", "")
            self.call(
                run_id, 3, "charge", {"order_id": order_id, "amount": "12.50"}, depends_on=["tc-2"]
            )
        self.end(run_id, abort=self.rng.random() < 0.3)

    def call(
        self,
        run_id: str,
        step: int,
        tool: str,
        args: dict[str, Any],
        depends_on: list[str] | None = None,
    ) -> dict[str, Any] | None:
        tc = f"tc-{step}"
        body: dict[str, Any] = {"step_index": step, "tool": tool, "args": args, "tool_call_id": tc}
        if depends_on:
            body["depends_on"] = depends_on
        key = f"{run_id}/{tc}"
        path = f"/api/v1/runs/{run_id}/calls"
        kind, call = self.settled(
            "call", key, {"tool": tool}, lambda: self.http.post(self.url(path), json=body)
        )
        if kind != OK or not isinstance(call, dict):
            return None
        return self.follow(key, call)

    def follow(self, key: str, call: dict[str, Any]) -> dict[str, Any] | None:
        """Long-polls a call until it is decided; hands its approval to the reviewer."""
        handed = False
        deadline = time.monotonic() + 120
        while call.get("status") not in FINAL and time.monotonic() < deadline:
            approval = call.get("approval") or {}
            if call.get("status") == "pending_approval" and not handed and approval:
                self.approvals.put((key, approval["approval_id"]))
                handed = True
            path = f"/api/v1/calls/{call['call_id']}?wait={POLL_S}"
            # Each try on any web process: one killed meanwhile does not hold the call up.
            get = lambda p=path: self.http.get(self.url(p))  # noqa: E731
            kind, answer = self.settled("read", key, None, get)
            if kind == OK and isinstance(answer, dict):
                call = answer
            elif kind == FAIL:
                return None
        return call

    def end(self, run_id: str, *, abort: bool) -> None:
        f, path = ("abort", "abort") if abort else ("complete", "complete")
        body = {"reason": "chaos: the agent gave up"} if abort else None
        self.settled(
            f,
            run_id,
            None,
            lambda: self.http.post(self.url(f"/api/v1/runs/{run_id}/{path}"), json=body),
        )


class Reviewer(Client):
    """Decides what the agents hand it in the console, as a person would: the approval's
    page, then its Approve or Reject form; four in five approved."""

    def __init__(
        self, *args: Any, username: str, password: str, approvals: queue.Queue[Any], **kw: Any
    ) -> None:
        super().__init__(*args, **kw)
        self.username, self.password, self.approvals = username, password, approvals
        self.http.follow_redirects = False

    def login(self) -> bool:
        url = self.url("/console/login/")
        try:
            page = self.http.get(url)
            token = _csrf(page.text)
            form = {
                "username": self.username,
                "password": self.password,
                "csrfmiddlewaretoken": token,
            }
            return self.http.post(url, data=form).status_code == 302
        except httpx.HTTPError:
            return False

    def loop(self, agents_done: threading.Event) -> None:
        while not self.login():
            time.sleep(0.5)
        while not (agents_done.is_set() and self.approvals.empty()):
            try:
                key, approval_id = self.approvals.get(timeout=0.5)
            except queue.Empty:
                continue
            self.decide(key, approval_id, approve=self.rng.random() < 0.8)

    def decide(self, key: str, approval_id: str, *, approve: bool) -> None:
        page = f"/console/approvals/{approval_id}/"
        kind, answer = self.settled("page", key, None, lambda: self.http.get(self.url(page)))
        if kind != OK or not isinstance(answer, httpx.Response):
            return
        found = re.search(r'name="args_hash" value="([^"]*)"', answer.text)
        if found is None:  # decided already (e.g. its run was aborted)
            return
        form = {
            "decision": "approve" if approve else "reject",
            "args_hash": found.group(1),
            "note": "" if approve else "chaos: not this one",
            # A charge's approval is confirmed (its page's dialog sends this field).
            "confirmed": "1",
            "csrfmiddlewaretoken": _csrf(answer.text),
        }
        self.settled(
            "decide",
            key,
            {"approve": approve},
            lambda: self.http.post(self.url(page + "decide/"), data=form),
        )


def _csrf(html: str) -> str:
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    return found.group(1) if found else ""
