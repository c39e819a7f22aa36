"""The one failure classifier (DESIGN.md "Failure classes"): what may be retried depends on
whether the request provably did not take effect, or whether a replay is harmless."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from toolops.executor.classify import Verdict, classify
from toolops.tools.outcome import Failure, Outcome, parse_retry_after

SAFE = True  # a read, an idempotent write, or a downstream honouring Idempotency-Key
UNSAFE = False


def http(status: int) -> Outcome:
    return Outcome(status=status, failure=Failure.HTTP, message=f"HTTP {status}")


@pytest.mark.parametrize("replay_safe", [SAFE, UNSAFE])
def test_it_passes_a_2xx_result(replay_safe: bool) -> None:
    verdict = classify(Outcome(status=200, body={"ok": True}), replay_safe=replay_safe)
    assert verdict.verdict is Verdict.OK
    assert verdict.is_ok


@pytest.mark.parametrize("status", [400, 401, 403, 404, 405, 409, 410, 422])
@pytest.mark.parametrize("replay_safe", [SAFE, UNSAFE])
def test_it_never_retries_other_4xx(status: int, replay_safe: bool) -> None:
    verdict = classify(http(status), replay_safe=replay_safe)
    assert verdict.verdict is Verdict.FATAL
    assert verdict.reason == "downstream_error"


@pytest.mark.parametrize("status", [429, 503])
@pytest.mark.parametrize("replay_safe", [SAFE, UNSAFE])
def test_it_retries_answers_that_prove_nothing_was_done_on_any_tool(
    status: int, replay_safe: bool
) -> None:
    verdict = classify(http(status), replay_safe=replay_safe)
    assert verdict.verdict is Verdict.RETRY
    assert verdict.reason == "downstream_error"


@pytest.mark.parametrize("status", [500, 502, 504])
def test_it_retries_ambiguous_5xx_only_where_a_replay_is_harmless(status: int) -> None:
    assert classify(http(status), replay_safe=SAFE).verdict is Verdict.RETRY
    unsafe = classify(http(status), replay_safe=UNSAFE)
    assert unsafe.verdict is Verdict.UNKNOWN
    assert unsafe.reason == "downstream_error"


def test_it_treats_other_5xx_as_ambiguous_too() -> None:
    assert classify(http(501), replay_safe=UNSAFE).verdict is Verdict.UNKNOWN
    assert classify(http(599), replay_safe=UNSAFE).verdict is Verdict.UNKNOWN


def test_it_retries_a_timeout_only_where_a_replay_is_harmless() -> None:
    timeout = Outcome(failure=Failure.TIMEOUT, message="no response within 2 s")
    safe = classify(timeout, replay_safe=SAFE)
    unsafe = classify(timeout, replay_safe=UNSAFE)
    assert (safe.verdict, safe.reason) == (Verdict.RETRY, "timeout")
    assert (unsafe.verdict, unsafe.reason) == (Verdict.UNKNOWN, "timeout")


def test_it_retries_a_reset_only_where_a_replay_is_harmless() -> None:
    reset = Outcome(failure=Failure.RESET, message="connection lost mid-request")
    assert classify(reset, replay_safe=SAFE).verdict is Verdict.RETRY
    unsafe = classify(reset, replay_safe=UNSAFE)
    assert unsafe.verdict is Verdict.UNKNOWN
    assert unsafe.reason == "downstream_error"


@pytest.mark.parametrize("replay_safe", [SAFE, UNSAFE])
def test_it_retries_a_refused_connection_on_any_tool(replay_safe: bool) -> None:
    refused = Outcome(failure=Failure.REFUSED, message="connection refused")
    verdict = classify(refused, replay_safe=replay_safe)
    assert verdict.verdict is Verdict.RETRY
    assert verdict.reason == "downstream_error"


@pytest.mark.parametrize("replay_safe", [SAFE, UNSAFE])
def test_it_calls_a_2xx_without_json_an_invalid_result(replay_safe: bool) -> None:
    outcome = Outcome(status=200, failure=Failure.INVALID_BODY, message="not JSON")
    verdict = classify(outcome, replay_safe=replay_safe)
    assert (verdict.verdict, verdict.reason) == (Verdict.FATAL, "result_invalid")


@pytest.mark.parametrize("retryable", [None, False])
@pytest.mark.parametrize("replay_safe", [SAFE, UNSAFE])
def test_it_calls_a_python_tool_exception_fatal_unless_it_says_otherwise(
    retryable: bool | None, replay_safe: bool
) -> None:
    outcome = Outcome(failure=Failure.ERROR, message="KeyError: 'x'", retryable=retryable)
    assert classify(outcome, replay_safe=replay_safe).verdict is Verdict.FATAL


def test_it_retries_a_retryable_python_tool_error_only_where_a_replay_is_harmless() -> None:
    outcome = Outcome(failure=Failure.ERROR, message="flaky", retryable=True)
    assert classify(outcome, replay_safe=SAFE).verdict is Verdict.RETRY
    assert classify(outcome, replay_safe=UNSAFE).verdict is Verdict.UNKNOWN


@pytest.mark.parametrize(
    ("header", "expected"),
    [("1", 1.0), ("0", 0.0), ("2.5", 2.5), (" 3 ", 3.0), ("-4", 0.0)],
)
def test_it_reads_retry_after_in_seconds(header: str, expected: float) -> None:
    assert parse_retry_after(header) == expected


def test_it_reads_retry_after_as_an_http_date() -> None:
    when = datetime.now(UTC) + timedelta(seconds=30)
    seconds = parse_retry_after(format_datetime(when, usegmt=True))
    assert seconds is not None
    assert 28 <= seconds <= 30
    past = format_datetime(datetime.now(UTC) - timedelta(hours=1), usegmt=True)
    assert parse_retry_after(past) == 0.0


@pytest.mark.parametrize("header", [None, "", "soon", "Wed, 99 Foo 2024"])
def test_it_ignores_a_missing_or_unreadable_retry_after(header: str | None) -> None:
    assert parse_retry_after(header) is None
