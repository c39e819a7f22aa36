"""What the adapter tests share: a model that answers offline at the SDK's network edge,
and a reviewer's approval that a real worker carries out."""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any
from unittest.mock import patch

import httpx

from tests.worker import Worker, wait_for
from toolops.approvals.services import approval_decide
from toolops.models import Approval, ToolCall

ORDER = {"sku": "A12", "qty": 1, "amount": "9.50"}
CHARGE = {"order_id": "ord-1", "amount": "9.50"}
FAST = {"TOOLOPS_APPROVAL_SWEEP_S": "0.5", "TOOLOPS_APPROVAL_GRACE_S": "1"}


class FakeModel:
    """The model, offline: the SDK's real client sends its real requests, and each one to
    `path` is answered with the next scripted reply (a JSON body in the API's own shape).
    `sent` keeps the request bodies: what the model was told, turn by turn. `http` is the
    HTTP library the SDK takes a client from (httpx; Anthropic's SDK takes only httpx2's)."""

    def __init__(self, path: str, replies: list[dict[str, Any]], *, http: ModuleType = httpx):
        self.path = path
        self.replies = list(replies)
        self.http = http
        self.sent: list[dict[str, Any]] = []

    def handle(self, request: Any) -> Any:
        if request.method != "POST" or request.url.path != self.path:
            error = {"type": "not_found", "message": f"no model at {request.url.path}"}
            return self.http.Response(404, json={"error": error})
        self.sent.append(json.loads(request.content))
        if not self.replies:
            error = {"type": "invalid_request_error", "message": "the script has no more turns"}
            return self.http.Response(400, json={"error": error})
        return self.http.Response(200, json=self.replies.pop(0))

    def http_client(self) -> Any:
        """For the SDK's `http_client=`: every request goes to `handle`, none to a network."""
        return self.http.Client(transport=self.http.MockTransport(self.handle))


def approve(reviewer: Any) -> Approval:
    """A reviewer approves the pending approval through the console's service. Its message
    to the worker is dropped: the test process shares no broker with the worker, whose
    sweep starts an approved call nobody started."""
    approval = Approval.objects.pending().get()
    with patch("toolops.tasks.execute_approved_call.delay", autospec=True):
        approval_decide(
            approval=approval, by=reviewer, approve=True, note="", args_hash=approval.args_hash
        )
    return approval


def carried_out(approval: Approval, worker: Worker) -> None:
    """Wait until the worker has run the approved call."""
    wait_for(lambda: ToolCall.objects.get(approval=approval).status == "succeeded", 30, worker)
