"""Long-polls as served (toolops/api/longpoll.py): waited on the event loop, answered as
soon as the call stops waiting, with the body and status of the call as it then is."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.conftest import Shop
from tests.console.conftest import make_user
from tests.toolops.api.helpers import Sent
from tests.waiting import wait_until
from toolops.accounts.tokens import agent_revoke, agent_token_rotate
from toolops.approvals.services import approval_decide
from toolops.models import Approval, ToolCall

HELD = {"step_index": 0, "tool": "charge", "args": {"order_id": "o-1", "amount": "5.00"}}


def agent_client(server: Any, token: str) -> httpx.Client:
    """Agent A's client of the served API, with its run r-a made."""
    auth = {"Authorization": f"Bearer {token}"}
    a = httpx.Client(base_url=f"{server.url}/api/v1", timeout=60, headers=auth)
    assert a.post("/runs", json={"run_id": "r-a"}).status_code == 201
    return a


def sent_in_background(
    request: Callable[[dict[str, Any]], httpx.Response],
) -> Callable[[], httpx.Response]:
    """`request(extensions)` in a thread of its own, returned from once httpx has sent it
    whole (the server holds it); call the result for its answer."""
    answers: list[httpx.Response] = []
    sent = Sent()
    thread = threading.Thread(target=lambda: answers.append(request(sent.extensions)))
    thread.start()
    assert sent.wait(30), "the long-poll was never sent"

    def answer() -> httpx.Response:
        thread.join(45)
        [only] = answers
        return only

    return answer


def held_call(a: httpx.Client) -> dict[str, Any]:
    """A charge of run r-a, held for a reviewer."""
    held = a.post("/runs/r-a/calls", json=HELD).json()
    assert held["status"] == "pending_approval"
    return dict(held)


def _reject_when_held(django_user_model: Any) -> None:
    wait_until(Approval.objects.exists, 20, failure="the call was never held")
    approval = Approval.objects.get()
    rita = make_user(django_user_model, "rita", "reviewers")
    approval_decide(
        approval=approval, by=rita, approve=False, note="no", args_hash=approval.args_hash
    )


def test_a_posted_call_long_polled_answers_once_a_reviewer_decides(
    toolops_server: Any, agent_a: Any, shop: Shop, django_user_model: Any
) -> None:
    server = toolops_server(TOOLOPS_API_THREADS="1")
    a = agent_client(server, agent_a[1])
    answers: list[httpx.Response] = []
    poster = threading.Thread(
        target=lambda: answers.append(a.post("/runs/r-a/calls", json={**HELD, "wait": 25}))
    )
    poster.start()
    _reject_when_held(django_user_model)
    started = time.monotonic()
    poster.join(30)
    assert time.monotonic() - started < 10  # answered at the decision, not at 25 s
    [answer] = answers
    assert answer.status_code == 200
    body = answer.json()
    assert body["status"] == "rejected" and body["approval"]["status"] == "rejected"
    assert body["replayed"] is False


def test_a_get_long_poll_times_out_with_the_call_still_waiting(
    toolops_server: Any, agent_a: Any, shop: Shop
) -> None:
    server = toolops_server()
    a = agent_client(server, agent_a[1])
    held = held_call(a)
    started = time.monotonic()
    answer = a.get(f"/calls/{held['call_id']}", params={"wait": 0.5})
    assert time.monotonic() - started >= 0.5
    assert answer.status_code == 202 and answer.json()["status"] == "pending_approval"
    assert answer.headers["content-type"] == "application/json"


def _revoke(agent: Any) -> None:
    agent_revoke(agent=agent)


def _rotate(agent: Any) -> None:
    agent_token_rotate(agent=agent)


@pytest.mark.parametrize(
    ("method", "change"),
    [("GET", _revoke), ("GET", _rotate), ("POST", _revoke)],
    ids=["get-revoked", "get-rotated", "post-revoked"],
)
def test_a_long_poll_whose_token_is_withdrawn_while_it_waits_answers_401(
    toolops_server: Any, agent_a: Any, shop: Shop, method: str, change: Any
) -> None:
    # The server process trusts the token it has seen for AGENT_CACHE_S: only the wait's
    # own looks can tell that it was withdrawn meanwhile (from the database, here by
    # another process). It used to answer the call, 202, at the end of the wait.
    server = toolops_server()
    a = agent_client(server, agent_a[1])
    held = held_call(a)

    def long_poll(trace: dict[str, Any]) -> httpx.Response:
        if method == "GET":
            return a.get(f"/calls/{held['call_id']}", params={"wait": 30}, extensions=trace)
        # The same request again: the held call, waited for.
        return a.post("/runs/r-a/calls", json={**HELD, "wait": 30}, extensions=trace)

    answer_of = sent_in_background(long_poll)
    change(agent_a[0])

    answer = answer_of()
    assert answer.status_code == 401, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.headers["www-authenticate"] == "Bearer"
    assert "revoked or replaced" in answer.json()["detail"]
    assert held["call_id"] not in answer.text  # nothing of the call


def test_a_long_poll_that_ends_at_its_deadline_answers_only_a_token_that_still_stands(
    toolops_server: Any, agent_a: Any, shop: Shop
) -> None:
    # A wait so short that it ends at its deadline before its first look: the answer
    # itself looks at the token. The server still trusts the token it saw a moment ago
    # (AGENT_CACHE_S), as a process other than the one that revoked it does.
    server = toolops_server()
    a = agent_client(server, agent_a[1])
    held = held_call(a)
    agent_revoke(agent=agent_a[0])

    answer = a.get(f"/calls/{held['call_id']}", params={"wait": "0.001"})

    assert answer.status_code == 401, answer.text
    assert "revoked or replaced" in answer.json()["detail"]


def test_a_long_poll_whose_call_is_purged_meanwhile_answers_404(
    toolops_server: Any, agent_a: Any, shop: Shop
) -> None:
    server = toolops_server()
    a = agent_client(server, agent_a[1])
    held = held_call(a)
    answer_of = sent_in_background(
        lambda trace: a.get(f"/calls/{held['call_id']}", params={"wait": 30}, extensions=trace)
    )
    ToolCall.objects.filter(call_id=held["call_id"]).delete()  # as retention's purge would

    answer = answer_of()
    assert answer.status_code == 404, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
