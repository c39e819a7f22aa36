"""toolops.tools.http.send against a real downstream: an answer past
TOOLOPS_DOWNSTREAM_MAX_BYTES is not read (not even whole into memory), its attempt says
so, and the connection it leaves unread is never reused."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from tests.toolops.tools.big import MIB, BigServer
from toolops.executor.classify import Verdict, classify
from toolops.tools import http
from toolops.tools.outcome import Failure

TEN_MIB = 10 * MIB


def send(url: str) -> http.Outcome:
    return http.send(url=url, method="POST", body={}, headers={}, timeout_s=10)


def test_it_reads_an_answer_of_exactly_the_cap(big: BigServer, settings: Any) -> None:
    settings.TOOLOPS_DOWNSTREAM_MAX_BYTES = 1000

    outcome = send(f"{big.url}/r?size=1000")

    assert outcome.ok and len(outcome.body["pad"]) == 1000 - len('{"pad":""}')


@pytest.mark.parametrize("framing", ["chunked", "length", "gzip"])
def test_it_stops_at_the_cap_however_the_answer_is_framed(
    big: BigServer, settings: Any, framing: str
) -> None:
    settings.TOOLOPS_DOWNSTREAM_MAX_BYTES = 1000

    outcome = send(f"{big.url}/r?size=1001&framing={framing}")

    assert outcome.failure is Failure.TOO_LARGE and outcome.status == 200
    assert outcome.body is None
    assert "the response was larger than 1000 bytes, the most ToolOps reads" in outcome.message
    verdict = classify(outcome, replay_safe=True)
    assert (verdict.verdict, verdict.reason) == (Verdict.FATAL, "downstream_error")


def test_it_holds_no_more_than_the_cap_of_a_50_mib_answer(big: BigServer) -> None:
    tracemalloc.start()
    try:
        outcome = send(f"{big.url}/r?size={50 * MIB}")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert outcome.failure is Failure.TOO_LARGE
    assert "larger than 10 MiB (10485760 bytes)" in outcome.message
    assert peak < 2 * TEN_MIB + MIB, peak  # read into one buffer, then joined: never 50 MiB


def test_it_judges_a_huge_error_page_by_its_status(big: BigServer, settings: Any) -> None:
    settings.TOOLOPS_DOWNSTREAM_MAX_BYTES = 1000

    outcome = send(f"{big.url}/r?size=5000&status=503")

    assert outcome.failure is Failure.HTTP and outcome.status == 503
    assert outcome.message == "HTTP 503 (its body, over 1000 bytes, was not read)"
    assert classify(outcome, replay_safe=False).verdict is Verdict.RETRY


def test_it_does_not_reuse_a_connection_left_with_an_unread_body(
    big: BigServer, settings: Any
) -> None:
    settings.TOOLOPS_DOWNSTREAM_MAX_BYTES = 1000

    for _ in range(3):
        assert send(f"{big.url}/r?size=4000").failure is Failure.TOO_LARGE
        small = send(f"{big.url}/r?size=100")

        assert small.ok and len(small.body["pad"]) == 100 - len('{"pad":""}')


def test_a_body_that_stalls_part_way_is_a_timeout(big: BigServer) -> None:
    outcome = http.send(
        url=f"{big.url}/r?size=1000&cut=stall",
        method="POST",
        body={},
        headers={},
        timeout_s=0.3,
    )

    assert outcome.failure is Failure.TIMEOUT and outcome.message == "no response within 0.3 s"


def test_a_body_dropped_part_way_is_a_reset(big: BigServer) -> None:
    outcome = send(f"{big.url}/r?size=1000&cut=drop")

    assert outcome.failure is Failure.RESET
    assert outcome.message.startswith("connection lost mid-request")
