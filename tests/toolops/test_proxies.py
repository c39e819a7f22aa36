"""toolops.proxies: X-Forwarded-* believed from the proxies TOOLOPS_TRUSTED_PROXIES names,
dropped from everyone else, for HTTP and WebSocket scopes alike."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from toolops.envs import trusted_proxies
from toolops.proxies import TrustedProxies

PROXIES = trusted_proxies("10.0.0.5, 192.168.0.0/16, fd00::/8")


def seen_by_the_app(scope: dict[str, Any]) -> dict[str, Any]:
    """The scope as the application behind the wrapper receives it."""
    seen: dict[str, Any] = {}

    async def app(inner: dict[str, Any], receive: Any, send: Any) -> None:
        seen.update(inner)

    asyncio.run(TrustedProxies(app, PROXIES)(scope, None, None))
    return seen


def scope(peer: str, *headers: tuple[str, str], kind: str = "http") -> dict[str, Any]:
    return {
        "type": kind,
        "scheme": "ws" if kind == "websocket" else "http",
        "client": (peer, 51000),
        "headers": [(b"host", b"toolops.example.com")]
        + [(k.encode(), v.encode()) for k, v in headers],
    }


FORGED = (
    ("x-forwarded-proto", "https"),
    ("x-forwarded-for", "198.51.100.7"),
    ("x-forwarded-host", "evil.example.com"),
    ("x-real-ip", "198.51.100.8"),
    ("forwarded", "for=198.51.100.9;proto=https"),
)


def test_it_drops_forwarding_headers_from_a_client_that_is_not_a_trusted_proxy() -> None:
    seen = seen_by_the_app(scope("203.0.113.20", *FORGED, ("accept", "text/html")))

    assert seen["scheme"] == "http"
    assert seen["client"] == ("203.0.113.20", 51000)
    assert seen["headers"] == [(b"host", b"toolops.example.com"), (b"accept", b"text/html")]


def test_it_takes_scheme_and_client_from_a_trusted_proxy() -> None:
    seen = seen_by_the_app(
        scope("10.0.0.5", ("x-forwarded-proto", "https"), ("x-forwarded-for", "198.51.100.7"))
    )

    assert seen["scheme"] == "https"
    assert seen["client"] == ("198.51.100.7", 0)


def test_it_trusts_a_proxy_by_its_network_ipv6_too() -> None:
    assert seen_by_the_app(scope("192.168.3.4", ("x-forwarded-proto", "https")))["scheme"] == (
        "https"
    )
    assert seen_by_the_app(scope("fd00::1", ("x-forwarded-for", "2001:db8::7")))["client"] == (
        "2001:db8::7",
        0,
    )


def test_the_client_is_the_nearest_address_that_is_not_a_trusted_proxy() -> None:
    # The client forged the leftmost entry; our two proxies appended the rest.
    forwarded = "1.2.3.4, 198.51.100.7, 192.168.1.1"

    seen = seen_by_the_app(scope("10.0.0.5", ("x-forwarded-for", forwarded)))

    assert seen["client"] == ("198.51.100.7", 0)


def test_a_garbled_forwarded_for_leaves_the_proxy_as_the_client() -> None:
    seen = seen_by_the_app(scope("10.0.0.5", ("x-forwarded-for", "<script>, not-an-ip")))

    assert seen["client"] == ("10.0.0.5", 51000)


def test_only_http_or_https_is_taken_as_a_scheme_and_the_last_value_counts() -> None:
    assert seen_by_the_app(scope("10.0.0.5", ("x-forwarded-proto", "gopher")))["scheme"] == "http"
    # A proxy that appends: what the client sent is on the left, our proxy's word last.
    appended = scope("10.0.0.5", ("x-forwarded-proto", "https, http"))
    assert seen_by_the_app(appended)["scheme"] == "http"


def test_a_websocket_through_a_trusted_proxy_is_wss() -> None:
    seen = seen_by_the_app(scope("10.0.0.5", ("x-forwarded-proto", "https"), kind="websocket"))

    assert seen["scheme"] == "wss"


def test_a_websocket_from_anyone_else_loses_its_forwarding_headers() -> None:
    seen = seen_by_the_app(scope("203.0.113.20", *FORGED, kind="websocket"))

    assert seen["scheme"] == "ws"
    assert seen["headers"] == [(b"host", b"toolops.example.com")]


def test_lifespan_passes_through() -> None:
    assert seen_by_the_app({"type": "lifespan"}) == {"type": "lifespan"}


def test_the_setting_names_a_bad_entry() -> None:
    with pytest.raises(ImproperlyConfigured, match="'10.0.0.300' is not an IP address"):
        trusted_proxies("10.0.0.5, 10.0.0.300")
    assert trusted_proxies(" , ") == []
