"""Who the client is, and whether it used HTTPS: X-Forwarded-* believed only from the
proxies that settings.TOOLOPS_TRUSTED_PROXIES names.

A client can send X-Forwarded-Proto: https over plain http, or X-Forwarded-For with any
address it likes. Django's SECURE_PROXY_SSL_HEADER believes the first from anyone, and a
lockout by address would believe the second. So, in front of everything the process
serves (console, admin, API, MCP, WebSockets — one place, not one middleware per
handler), this ASGI wrapper:

- from a trusted proxy, takes the scheme from X-Forwarded-Proto and the client's address
  from X-Forwarded-For (the nearest address that is not itself a trusted proxy: the ones
  further left were written by whoever the first proxy heard from, and can be forged);
- from anyone else, removes every X-Forwarded-* (and Forwarded, X-Real-IP) header, so
  nothing downstream of it — Django, Channels, the OpenTelemetry instrumentation — can
  believe them by mistake.

Django then reads the scheme from the ASGI scope (request.is_secure()) and the address
from REMOTE_ADDR: both are the client's."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Scope = dict[str, Any]

# Headers only a proxy may set: dropped from any other peer's request.
FORWARDING_HEADERS = frozenset(
    {
        b"x-forwarded-for",
        b"x-forwarded-proto",
        b"x-forwarded-host",
        b"x-forwarded-port",
        b"x-forwarded-prefix",
        b"x-forwarded-scheme",
        b"x-forwarded-ssl",
        b"x-real-ip",
        b"forwarded",
    }
)


def is_trusted(address: str | None, networks: Sequence[Network]) -> bool:
    if not address or not networks:
        return False
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False  # a unix socket's peer, or garbage
    return any(ip in network for network in networks)


def forwarded_client(values: list[str], networks: Sequence[Network]) -> str | None:
    """The client's address from X-Forwarded-For: walking from the right (the address
    our proxy heard from), the first one that is not a trusted proxy. None when the
    header holds something that is not an address."""
    hops = [hop.strip() for value in values for hop in value.split(",")]
    client = None
    for hop in reversed(hops):
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            return client
        client = hop
        if not is_trusted(hop, networks):
            break
    return client


class TrustedProxies:
    def __init__(self, app: Any, networks: Sequence[Network]) -> None:
        self.app = app
        self.networks = list(networks)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        headers = scope.get("headers") or []
        if not any(name in FORWARDING_HEADERS for name, _ in headers):
            return await self.app(scope, receive, send)
        peer = (scope.get("client") or (None, 0))[0]
        if is_trusted(peer, self.networks):
            scope = self._as_forwarded(scope, headers)
        else:
            kept = [(name, value) for name, value in headers if name not in FORWARDING_HEADERS]
            scope = {**scope, "headers": kept}
        return await self.app(scope, receive, send)

    def _as_forwarded(self, scope: Scope, headers: list[tuple[bytes, bytes]]) -> Scope:
        scope = dict(scope)
        protos = [v for n, v in headers if n == b"x-forwarded-proto"]
        if protos:
            # The last value is the one our proxy wrote (one that appends keeps what it
            # was sent on the left).
            proto = protos[-1].decode("latin-1").rsplit(",", 1)[-1].strip().lower()
            if proto in ("http", "https"):
                secure = proto == "https"
                if scope["type"] == "websocket":
                    scope["scheme"] = "wss" if secure else "ws"
                else:
                    scope["scheme"] = proto
        hops = [v.decode("latin-1") for n, v in headers if n == b"x-forwarded-for"]
        client = forwarded_client(hops, self.networks) if hops else None
        if client:
            scope["client"] = (client, 0)
        return scope
