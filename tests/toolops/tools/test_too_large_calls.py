"""A call whose downstream answers more than TOOLOPS_DOWNSTREAM_MAX_BYTES, through the
API: never retried; a read ends `failed`, a write (which took effect) `degraded` with no
result; the message names the size and the feedback tells the model what to do."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.toolops.api.helpers import body, create_run, post_call
from tests.toolops.tools.big import BigServer
from toolops.models import Attempt, ToolCall

pytestmark = pytest.mark.django_db

SIZE_TEXT = "the response was larger than 10 MiB (10485760 bytes), the most ToolOps reads"


def test_a_read_past_the_cap_fails_once_saying_so(api: APIClient, big_catalog: BigServer) -> None:
    server = big_catalog
    create_run(api)

    call = body(post_call(api, step_index=0, tool="big_report", args={}))

    assert call["status"] == "failed"
    assert call["error"] == {"class": "fatal", "reason": "downstream_error", "message": SIZE_TEXT}
    assert call["result"] is None and call["attempts"] == 1
    assert "answered with more than ToolOps reads" in call["feedback"]
    assert "Ask for less" in call["feedback"]
    assert server.requests == 1
    assert Attempt.objects.get().http_status == 200


def test_a_write_past_the_cap_is_degraded_as_done_and_not_sent_again(
    api: APIClient, big_catalog: BigServer
) -> None:
    server = big_catalog
    create_run(api)

    call = body(post_call(api, step_index=0, tool="big_import", args={}))

    assert call["status"] == "degraded"
    assert call["error"]["reason"] == "downstream_error"
    assert call["error"]["message"] == f"{SIZE_TEXT}; the write took effect"
    assert call["result"] is None and call["attempts"] == 1
    assert call["feedback"].startswith("big_import was done, but its answer was too large")
    assert "Do not call it again" in call["feedback"]
    assert server.requests == 1
    assert ToolCall.objects.get().status == ToolCall.Status.DEGRADED
