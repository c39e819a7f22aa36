"""Stored error texts as sentences naming the service (toolops/tools/wording.py): what every
console page and notification shows instead of a Python repr."""

from __future__ import annotations

import pytest

from toolops.tools.spec import ToolSpec
from toolops.tools.wording import error_sentence, service_name

REFUND = ToolSpec(name="refund", kind="idempotent_write", url="http://pay:9000/payments/refunds")
LOCAL = ToolSpec(name="quote_total", kind="read")


@pytest.mark.parametrize(
    ("text", "sentence"),
    [
        (
            "ConnectionResetError(104, 'Connection reset by peer')",
            "connection reset by the payments service",
        ),
        (
            "connection lost mid-request (ConnectionResetError(104, 'Connection reset by peer'))",
            "connection reset by the payments service",
        ),
        ("HTTP 503: injected_fault", "the payments service answered 503 (unavailable)"),
        ("HTTP 500", "the payments service answered 500 (internal error)"),
        # Already a sentence about a service: kept, with what it says beyond the words.
        ("orders service timed out after 2 attempts", "orders service timed out after 2 attempts"),
        ("HTTP 418: teapot", "the payments service answered 418 (i'm a teapot)"),
        ("no response within 2 s", "no answer from the payments service within 2 s"),
        ("TimeoutError()", "no answer from the payments service in time"),
        ("could not connect in 2 s", "could not reach the payments service within 2 s"),
        (
            "connection refused ([Errno 111] Connection refused)",
            "the payments service refused the connection",
        ),
        (
            "ConnectionRefusedError(111, 'Connection refused')",
            "the payments service refused the connection",
        ),
        (
            "connection lost mid-request (RemoteDisconnected('Remote end closed'))",
            "the connection to the payments service broke before it answered",
        ),
        (
            "the response body is not JSON",
            "the payments service answered with something that is not JSON",
        ),
        (
            "request failed (SSLError)",
            "calling the payments service failed unexpectedly (SSLError)",
        ),
        # Already words, and not about the service: kept as they are.
        ("warehouse said no", "warehouse said no"),
        ("", ""),
    ],
)
def test_an_error_reads_as_a_sentence_naming_the_service(text: str, sentence: str) -> None:
    assert error_sentence(text, tool="refund", spec=REFUND) == sentence


def test_the_service_is_the_urls_first_path_segment_else_the_tool() -> None:
    assert service_name("refund", REFUND) == "payments"
    assert service_name("quote_total", LOCAL) == "quote total"
    assert service_name("gone_tool") == "gone tool"  # not in the catalog any more
    assert error_sentence("HTTP 502", tool="gone_tool") == (
        "the gone tool service answered 502 (bad gateway)"
    )
