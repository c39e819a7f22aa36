"""Export is configured by the standard OTEL_* variables only, on when they ask for it
and off otherwise; a bad value is a clear error at start-up."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from traces import otel
from traces.spans import parent_span_of

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({}, []),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, ["otlp"]),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, ["otlp"]),
        ({"OTEL_TRACES_EXPORTER": "otlp, console"}, ["otlp", "console"]),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, []),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, []),
    ],
)
def test_it_exports_only_when_asked(env: dict[str, str], names: list[str]) -> None:
    assert otel.exporter_names(env) == names


def test_it_names_an_unknown_exporter() -> None:
    with pytest.raises(ImproperlyConfigured, match="unknown exporter zipkin"):
        otel.exporter_names({"OTEL_TRACES_EXPORTER": "zipkin"})


def test_it_speaks_http_protobuf_by_default_and_grpc_when_asked() -> None:
    assert otel.protocol({}) == "http/protobuf"
    assert otel.protocol({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}) == "grpc"
    # The traces-specific variable wins, as the specification says.
    env = {
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
    }
    assert otel.protocol(env) == "http/protobuf"
    with pytest.raises(ImproperlyConfigured, match="'http/json' is not supported"):
        otel.protocol({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})


def test_this_process_exports_nothing_without_the_variables() -> None:
    # The test run sets none of them: no exporter, no processor, no instrumentation.
    assert not otel.exporting()


@pytest.mark.parametrize(
    ("header", "parent"),
    [
        (f"00-{TRACE}-00f067aa0ba902b7-01", "00f067aa0ba902b7"),
        (f"00-{TRACE.upper()}-00F067AA0BA902B7-00", "00f067aa0ba902b7"),
        (f"00-{'1' * 32}-00f067aa0ba902b7-01", ""),  # another trace: not its parent
        (f"00-{TRACE}-0000000000000000-01", ""),  # an invalid (all-zero) span id
        (f"ff-{TRACE}-00f067aa0ba902b7-01", ""),  # a forbidden version
        (f"00-{TRACE}-00f067aa0ba902zz-01", ""),
        ("garbage", ""),
        ("", ""),
    ],
)
def test_a_call_span_is_the_agents_child_only_for_a_valid_traceparent_of_its_trace(
    header: str, parent: str
) -> None:
    assert parent_span_of(header, TRACE) == parent
