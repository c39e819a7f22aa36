"""The shop's server: its fault table, its request log and the control API under
``/_shop/`` (health, requests, state, reset, faults) that tests and the demo drive.

`start_shop` serves it from a daemon thread; ``python -m toolops.demo.shop`` runs it as a
process of its own.
"""

from __future__ import annotations

import random
import socketserver
import sys
import threading
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from toolops.demo.shop.connection import ShopHandler
from toolops.demo.shop.faults import Fault, Plan, fault_json, parse_fault
from toolops.demo.shop.replies import JSON, Invalid, Reply, body_object, invalid_reply, not_found
from toolops.demo.shop.storage import ShopDB

# The request log is for tests and the demo; cap it so a long soak cannot exhaust memory.
MAX_LOGGED_REQUESTS = 100_000


class ShopServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(
        self, address: tuple[str, int], *, db_path: str | None = None, verbose: bool = False
    ) -> None:
        self.db = ShopDB(db_path)
        self.verbose = verbose
        # Set on shutdown: wakes requests parked in latency or hang faults.
        self.closing = threading.Event()
        self._faults: dict[str, Fault] = {}
        self._faults_lock = threading.Lock()
        self._requests: list[JSON] = []
        self._requests_lock = threading.Lock()
        self._rng = random.Random()
        super().__init__(address, ShopHandler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind resolves the host with getfqdn(), which can stall start-up.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    @property
    def base_url(self) -> str:
        return f"http://{self.server_name}:{self.server_port}"

    def shutdown(self) -> None:
        """Stop serving, wake requests parked in a fault, release the socket and database."""
        self.closing.set()
        super().shutdown()
        self.server_close()

    def server_close(self) -> None:
        super().server_close()
        self.db.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that hang up mid-request are routine here (the faults provoke it).
        if self.verbose or not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)

    # request log

    def log_arrival(self, entry: JSON) -> None:
        with self._requests_lock:
            if len(self._requests) >= MAX_LOGGED_REQUESTS:
                del self._requests[: MAX_LOGGED_REQUESTS // 10]
            self._requests.append(entry)

    def logged_requests(self, path: str | None) -> list[JSON]:
        with self._requests_lock:
            return [dict(e) for e in self._requests if path is None or e["path"] == path]

    # faults

    def plan_for(self, path: str) -> Plan:
        with self._faults_lock:
            fault = self._faults.get(path)
            if fault is None:
                return Plan()
            plan = fault.take(self._rng)
            # Forget a spent fault so GET /_shop/faults shows only what still applies.
            if fault.is_spent():
                del self._faults[path]
            return plan

    def set_fault(self, path: str, fault: Fault | None) -> None:
        with self._faults_lock:
            if fault is None or fault.is_spent():
                self._faults.pop(path, None)
            else:
                self._faults[path] = fault

    def faults(self) -> JSON:
        with self._faults_lock:
            return {path: fault_json(fault) for path, fault in self._faults.items()}

    def reset(self) -> None:
        with self._faults_lock:
            self._faults.clear()
        with self._requests_lock:
            self._requests.clear()
        self.db.reset()

    # control API

    def control(self, method: str, path: str, query: str, raw: bytes) -> Reply:
        route = CONTROL_ROUTES.get(path)
        if route is None:
            return not_found(f"no such control endpoint: {path}")
        allowed, action = route
        if method not in allowed:
            return Reply(405, {"error": "method_not_allowed"}, {"Allow": ", ".join(allowed)})
        try:
            return action(self, method, query, raw)
        except Invalid as exc:
            return invalid_reply(exc)


Control = Callable[[ShopServer, str, str, bytes], Reply]


def _control_health(server: ShopServer, method: str, query: str, raw: bytes) -> Reply:
    return Reply(200, {"ok": True})


def _control_requests(server: ShopServer, method: str, query: str, raw: bytes) -> Reply:
    path = parse_qs(query).get("path", [None])[0]
    requests = server.logged_requests(path)
    return Reply(200, {"count": len(requests), "requests": requests})


def _control_state(server: ShopServer, method: str, query: str, raw: bytes) -> Reply:
    return Reply(200, server.db.snapshot())


def _control_reset(server: ShopServer, method: str, query: str, raw: bytes) -> Reply:
    server.reset()
    return Reply(200, {"ok": True})


def _control_faults(server: ShopServer, method: str, query: str, raw: bytes) -> Reply:
    if method == "GET":
        return Reply(200, {"faults": server.faults()})
    path, fault = parse_fault(body_object(raw))
    server.set_fault(path, fault)
    active = fault_json(fault) if fault is not None and not fault.is_spent() else None
    return Reply(200, {"path": path, "fault": active})


CONTROL_ROUTES: dict[str, tuple[tuple[str, ...], Control]] = {
    "/_shop/health": (("GET",), _control_health),
    "/_shop/requests": (("GET",), _control_requests),
    "/_shop/state": (("GET",), _control_state),
    "/_shop/reset": (("POST",), _control_reset),
    "/_shop/faults": (("GET", "POST"), _control_faults),
}


def start_shop(
    port: int = 0, db_path: str | None = None, *, host: str = "127.0.0.1", verbose: bool = False
) -> tuple[ShopServer, str]:
    """Serve the shop from a daemon thread; stop it with ``server.shutdown()``."""
    server = ShopServer((host, port), db_path=db_path, verbose=verbose)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="shop", daemon=True
    )
    thread.start()
    return server, server.base_url
