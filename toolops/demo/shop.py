"""The demo downstream shop: inventory, orders, payments and notifications over HTTP.

A standalone, standard-library-only service that ToolOps' demo and tests call as real
downstream tools. Faults (latency, errors, 429 bursts, hangs, responses lost after the
commit) are switched per path at run time through the control API under ``/_shop/``.

    python -m toolops.demo.shop --port 9000 --db var/shop.sqlite3

Only inventory writes honour ``Idempotency-Key``; orders and payments rely on their
unique indexes (client_reference, order_id) as the backstop, which is exactly the case
ToolOps has to reconcile with a query.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import socket
import socketserver
import sqlite3
import struct
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, fields
from decimal import Decimal, InvalidOperation
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any
from urllib.parse import parse_qs, urlsplit

JSON = dict[str, Any]

SEED_STOCK = {"A12": 50, "B7": 5, "C3": 0, "D9": 100}
# The product catalogue behind POST /catalog/search: fixed, never changed by a request.
PRODUCTS = {
    "A12": "Espresso machine",
    "B7": "Coffee grinder",
    "C3": "Milk frother",
    "D9": "Coffee beans, 1 kg",
}
MAX_BODY_BYTES = 1024 * 1024
# The request log is for tests and the demo; cap it so a long soak cannot exhaust memory.
MAX_LOGGED_REQUESTS = 100_000
RECORDED_HEADERS = (
    "idempotency-key",
    "traceparent",
    "x-toolops-run-id",
    "x-toolops-tool-call-id",
    "x-toolops-attempt",
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS products (
    sku TEXT PRIMARY KEY,
    name TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS stock (
    sku TEXT PRIMARY KEY,
    available INTEGER NOT NULL CHECK (available >= 0)
);
CREATE TABLE IF NOT EXISTS reservations (
    reservation_id TEXT PRIMARY KEY,
    sku TEXT NOT NULL,
    qty INTEGER NOT NULL,
    status TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS orders (
    order_id TEXT PRIMARY KEY,
    sku TEXT NOT NULL,
    qty INTEGER NOT NULL,
    amount TEXT NOT NULL,
    client_reference TEXT NOT NULL UNIQUE,
    status TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS charges (
    charge_id TEXT PRIMARY KEY,
    order_id TEXT NOT NULL UNIQUE,
    amount TEXT NOT NULL,
    client_reference TEXT UNIQUE,
    status TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS refunds (
    refund_id TEXT PRIMARY KEY,
    charge_id TEXT NOT NULL UNIQUE,
    amount TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS notifications (
    notification_id TEXT PRIMARY KEY,
    recipient TEXT NOT NULL,
    message TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS idempotency_keys (
    path TEXT NOT NULL,
    key TEXT NOT NULL,
    status INTEGER NOT NULL,
    body TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (path, key)
);
"""
DATA_TABLES = ("reservations", "orders", "charges", "refunds", "notifications")


# --- replies and input validation -------------------------------------------------------


@dataclass
class Reply:
    status: int
    body: JSON
    headers: dict[str, str] = field(default_factory=dict)


class Invalid(Exception):
    """A missing or ill-typed field; answered 400 with the field named."""

    def __init__(self, field_name: str, problem: str) -> None:
        super().__init__(f"{field_name}: {problem}")
        self.field_name = field_name


def _invalid(exc: Invalid) -> Reply:
    return Reply(400, {"error": "invalid", "field": exc.field_name, "detail": str(exc)})


def _not_found(detail: str) -> Reply:
    return Reply(404, {"error": "not_found", "detail": detail})


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _parse_json(raw: bytes) -> Any:
    # Decimal keeps "199.00" sent as a number exact; NaN/Infinity are not JSON.
    return json.loads(raw.decode("utf-8"), parse_float=Decimal, parse_constant=_reject_constant)


def _json_default(value: object) -> object:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _dumps(value: object) -> bytes:
    return json.dumps(value, default=_json_default).encode()


def _body_object(raw: bytes) -> JSON:
    """Parse a request body that must be a JSON object; an empty body is {}."""
    if not raw.strip():
        return {}
    try:
        body = _parse_json(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise Invalid("body", f"malformed JSON ({exc})") from None
    if not isinstance(body, dict):
        raise Invalid("body", "must be a JSON object")
    return body


def _text(body: JSON, name: str) -> str:
    value = _optional_text(body, name)
    if value is None:
        raise Invalid(name, "is required")
    return value


def _optional_text(body: JSON, name: str) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise Invalid(name, "must be a non-empty string")
    return value.strip()


def _quantity(body: JSON, name: str) -> int:
    value = body.get(name)
    if value is None:
        raise Invalid(name, "is required")
    # JSON Schema counts 2.0 as an integer, so a caller validating with it may pass one on.
    if isinstance(value, Decimal) and value == value.to_integral_value():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid(name, "must be an integer")
    if value < 1:
        raise Invalid(name, "must be at least 1")
    return value


def _amount(body: JSON, name: str) -> str:
    """A decimal string or number, stored as a plain decimal string ("199.00" stays so)."""
    value = body.get(name)
    if value is None:
        raise Invalid(name, "is required")
    if isinstance(value, bool) or not isinstance(value, str | int | Decimal):
        raise Invalid(name, "must be a decimal string or a number")
    try:
        amount = Decimal(value.strip() if isinstance(value, str) else value)
    except InvalidOperation:
        raise Invalid(name, "must be a decimal string or a number") from None
    text = format(amount, "f") if amount.is_finite() else ""
    if not text or amount < 0 or len(text) > 40:
        raise Invalid(name, "must be a finite, non-negative decimal")
    return text


def _new_id(prefix: str) -> str:
    # Random, not sequential: ids must not repeat after /_shop/reset, since ToolOps keeps them.
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


# --- business handlers: each runs inside one locked transaction ---------------------------

Handler = Callable[[sqlite3.Connection, JSON], Reply]


def stock_query(conn: sqlite3.Connection, body: JSON) -> Reply:
    sku = _text(body, "sku")
    row = conn.execute("SELECT available FROM stock WHERE sku = ?", (sku,)).fetchone()
    if row is None:
        return _not_found(f"unknown sku {sku}")
    return Reply(200, {"sku": sku, "available": row["available"]})


def product_search(conn: sqlite3.Connection, body: JSON) -> Reply:
    """Products whose name contains every word of `q` (case-insensitive); none is not 404."""
    words = _text(body, "q").lower().split()
    rows = conn.execute("SELECT sku, name FROM products ORDER BY sku").fetchall()
    items = [dict(r) for r in rows if all(w in r["name"].lower() for w in words)]
    return Reply(200, {"items": items})


def reservation_create(conn: sqlite3.Connection, body: JSON) -> Reply:
    sku, qty = _text(body, "sku"), _quantity(body, "qty")
    row = conn.execute("SELECT available FROM stock WHERE sku = ?", (sku,)).fetchone()
    if row is None:
        return _not_found(f"unknown sku {sku}")
    if row["available"] < qty:
        return Reply(
            409, {"error": "insufficient_stock", "sku": sku, "available": row["available"]}
        )
    reservation_id = _new_id("res")
    conn.execute("UPDATE stock SET available = available - ? WHERE sku = ?", (qty, sku))
    conn.execute(
        "INSERT INTO reservations VALUES (?, ?, ?, 'reserved', ?)",
        (reservation_id, sku, qty, time.time()),
    )
    return Reply(
        200, {"reservation_id": reservation_id, "sku": sku, "qty": qty, "status": "reserved"}
    )


def reservation_release(conn: sqlite3.Connection, body: JSON) -> Reply:
    reservation_id = _text(body, "reservation_id")
    row = conn.execute(
        "SELECT sku, qty, status FROM reservations WHERE reservation_id = ?", (reservation_id,)
    ).fetchone()
    if row is None:
        return _not_found(f"unknown reservation {reservation_id}")
    # Only the first release returns stock; a repeated one just confirms the state.
    if row["status"] == "reserved":
        conn.execute(
            "UPDATE reservations SET status = 'released' WHERE reservation_id = ?",
            (reservation_id,),
        )
        conn.execute(
            "UPDATE stock SET available = available + ? WHERE sku = ?", (row["qty"], row["sku"])
        )
    return Reply(
        200,
        {
            "reservation_id": reservation_id,
            "sku": row["sku"],
            "qty": row["qty"],
            "status": "released",
        },
    )


ORDER_COLUMNS = "order_id, sku, qty, amount, client_reference, status"
CHARGE_COLUMNS = "charge_id, order_id, amount, client_reference, status"


def _order(conn: sqlite3.Connection, column: str, value: str) -> JSON | None:
    row = conn.execute(
        f"SELECT {ORDER_COLUMNS} FROM orders WHERE {column} = ?", (value,)
    ).fetchone()
    return dict(row) if row is not None else None


def order_create(conn: sqlite3.Connection, body: JSON) -> Reply:
    sku, qty = _text(body, "sku"), _quantity(body, "qty")
    amount, reference = _amount(body, "amount"), _text(body, "client_reference")
    order_id = _new_id("ord")
    try:
        # No read-before-write: the UNIQUE(client_reference) index is the backstop.
        conn.execute(
            "INSERT INTO orders VALUES (?, ?, ?, ?, ?, 'created', ?)",
            (order_id, sku, qty, amount, reference, time.time()),
        )
    except sqlite3.IntegrityError:
        existing = _order(conn, "client_reference", reference)
        if existing is None:
            raise
        return Reply(409, {"error": "duplicate", "order_id": existing["order_id"]})
    return Reply(201, _order(conn, "order_id", order_id) or {})


def order_cancel(conn: sqlite3.Connection, body: JSON) -> Reply:
    order_id = _text(body, "order_id")
    if _order(conn, "order_id", order_id) is None:
        return _not_found(f"unknown order {order_id}")
    conn.execute("UPDATE orders SET status = 'cancelled' WHERE order_id = ?", (order_id,))
    return Reply(200, _order(conn, "order_id", order_id) or {})


def order_lookup(conn: sqlite3.Connection, body: JSON) -> Reply:
    order_id = _optional_text(body, "order_id")
    reference = _optional_text(body, "client_reference")
    if order_id is None and reference is None:
        raise Invalid("client_reference", "is required (or order_id)")
    order = (
        _order(conn, "order_id", order_id)
        if order_id is not None
        else _order(conn, "client_reference", reference or "")
    )
    return Reply(200, order) if order is not None else _not_found("no such order")


def _charge(conn: sqlite3.Connection, column: str, value: str) -> JSON | None:
    row = conn.execute(
        f"SELECT {CHARGE_COLUMNS} FROM charges WHERE {column} = ?", (value,)
    ).fetchone()
    return dict(row) if row is not None else None


def charge_create(conn: sqlite3.Connection, body: JSON) -> Reply:
    order_id, amount = _text(body, "order_id"), _amount(body, "amount")
    reference = _optional_text(body, "client_reference")
    charge_id = _new_id("ch")
    try:
        # UNIQUE(order_id) and UNIQUE(client_reference): one charge per order, whatever retries.
        conn.execute(
            "INSERT INTO charges VALUES (?, ?, ?, ?, 'captured', ?)",
            (charge_id, order_id, amount, reference, time.time()),
        )
    except sqlite3.IntegrityError:
        existing = _charge(conn, "order_id", order_id)
        if existing is None and reference is not None:
            existing = _charge(conn, "client_reference", reference)
        if existing is None:
            raise
        return Reply(409, {"error": "duplicate", "charge_id": existing["charge_id"]})
    return Reply(200, _charge(conn, "charge_id", charge_id) or {})


def charge_lookup(conn: sqlite3.Connection, body: JSON) -> Reply:
    order_id = _optional_text(body, "order_id")
    reference = _optional_text(body, "client_reference")
    if order_id is None and reference is None:
        raise Invalid("order_id", "is required (or client_reference)")
    charge = (
        _charge(conn, "order_id", order_id)
        if order_id is not None
        else _charge(conn, "client_reference", reference or "")
    )
    return Reply(200, charge) if charge is not None else _not_found("no such charge")


def refund_create(conn: sqlite3.Connection, body: JSON) -> Reply:
    charge_id = _text(body, "charge_id")
    charge = _charge(conn, "charge_id", charge_id)
    if charge is None:
        return _not_found(f"unknown charge {charge_id}")
    # UNIQUE(charge_id) makes a second refund of the same charge a no-op that reports the first.
    conn.execute(
        "INSERT OR IGNORE INTO refunds VALUES (?, ?, ?, ?)",
        (_new_id("re"), charge_id, charge["amount"], time.time()),
    )
    conn.execute("UPDATE charges SET status = 'refunded' WHERE charge_id = ?", (charge_id,))
    row = conn.execute(
        "SELECT refund_id, amount FROM refunds WHERE charge_id = ?", (charge_id,)
    ).fetchone()
    return Reply(
        200,
        {
            "refund_id": row["refund_id"],
            "charge_id": charge_id,
            "amount": row["amount"],
            "status": "refunded",
        },
    )


def notification_create(conn: sqlite3.Connection, body: JSON) -> Reply:
    recipient, message = _text(body, "to"), _text(body, "message")
    notification_id = _new_id("ntf")
    conn.execute(
        "INSERT INTO notifications VALUES (?, ?, ?, ?)",
        (notification_id, recipient, message, time.time()),
    )
    return Reply(200, {"notification_id": notification_id, "to": recipient, "status": "sent"})


ROUTES: dict[str, Handler] = {
    "/inventory/stock": stock_query,
    "/catalog/search": product_search,
    "/inventory/reservations": reservation_create,
    "/inventory/reservations/release": reservation_release,
    "/orders": order_create,
    "/orders/cancel": order_cancel,
    "/orders/lookup": order_lookup,
    "/payments/charges": charge_create,
    "/payments/charges/lookup": charge_lookup,
    "/payments/refunds": refund_create,
    "/notifications": notification_create,
}
# Stock queries have no effect to protect; replaying one would only return a stale count.
IDEMPOTENT_PATHS = frozenset({"/inventory/reservations", "/inventory/reservations/release"})


# --- storage ------------------------------------------------------------------------------


class ShopDB:
    """One SQLite connection shared by all request threads, serialised by a lock."""

    def __init__(self, path: str | None) -> None:
        self.lock = threading.RLock()
        self._conn = sqlite3.connect(
            path or ":memory:", check_same_thread=False, isolation_level=None
        )
        self._conn.row_factory = sqlite3.Row
        if path:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(SCHEMA)
        with self.transaction() as conn:
            # OR IGNORE: a persistent --db keeps its stock levels across restarts.
            conn.executemany("INSERT OR IGNORE INTO stock VALUES (?, ?)", SEED_STOCK.items())
            conn.executemany("INSERT OR IGNORE INTO products VALUES (?, ?)", PRODUCTS.items())

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self.lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def execute(self, path: str, body: JSON, idempotency_key: str | None) -> Reply:
        """Run one business request; effect and saved idempotent reply commit together."""
        handler = ROUTES[path]
        honour_key = bool(idempotency_key) and path in IDEMPOTENT_PATHS
        with self.transaction() as conn:
            # Inside the lock, so a concurrent request with the same key waits and replays.
            if honour_key:
                saved = conn.execute(
                    "SELECT status, body FROM idempotency_keys WHERE path = ? AND key = ?",
                    (path, idempotency_key),
                ).fetchone()
                if saved is not None:
                    replayed = {"Idempotent-Replayed": "true"}
                    return Reply(saved["status"], json.loads(saved["body"]), replayed)
            try:
                reply = handler(conn, body)
            except Invalid as exc:
                # Like Stripe: a request that failed validation never ran, so nothing is saved.
                return _invalid(exc)
            if honour_key:
                conn.execute(
                    "INSERT INTO idempotency_keys VALUES (?, ?, ?, ?, ?)",
                    (path, idempotency_key, reply.status, json.dumps(reply.body), time.time()),
                )
        return reply

    def reset(self) -> None:
        with self.transaction() as conn:
            for table in (*DATA_TABLES, "idempotency_keys", "stock"):
                conn.execute(f"DELETE FROM {table}")
            conn.executemany("INSERT INTO stock VALUES (?, ?)", SEED_STOCK.items())

    def snapshot(self) -> JSON:
        with self.lock:
            state: JSON = {
                table: [dict(row) for row in self._conn.execute(f"SELECT * FROM {table}")]
                for table in DATA_TABLES
            }
            stock = self._conn.execute("SELECT sku, available FROM stock ORDER BY sku")
            state["stock"] = {row["sku"]: row["available"] for row in stock}
        state["counts"] = {table: len(state[table]) for table in DATA_TABLES}
        return state

    def close(self) -> None:
        with self.lock:
            self._conn.close()


# --- fault injection ----------------------------------------------------------------------


@dataclass
class Plan:
    """What the fault table decided for one request, fixed when it arrived."""

    latency_s: float = 0.0
    fault: str | None = None
    status: int | None = None  # answer this at once, without effect
    retry_after: float | None = None
    hang_s: float | None = None  # hang without effect, then drop the connection
    hang_after_commit_s: float = 0.0
    drop_after_commit: bool = False
    status_after_commit: int | None = None


@dataclass
class Fault:
    """The fault set on one path. Counters are decremented as requests consume them."""

    latency_ms: int = 0
    fail_next: int = 0
    fail_status: int | None = None
    retry_after: float | None = None
    error_rate: float = 0.0
    burst_429: int = 0
    timeout_next: int = 0
    hang_s: float = 30.0
    drop_after_commit: int = 0
    commit_then_status: int = 0
    hang_after_commit_s: float = 0.0

    def take(self, rng: random.Random) -> Plan:
        """Decide one request's fate; the caller holds the fault lock."""
        plan = Plan(latency_s=self.latency_ms / 1000)
        # Only the first fault that fires is consumed, so counters play out one after another.
        if self.fail_next > 0:
            self.fail_next -= 1
            return self._refuse(plan, "fail_next", self.fail_status or 503, self.retry_after)
        if self.error_rate and rng.random() < self.error_rate:
            return self._refuse(plan, "error_rate", self.fail_status or 503, self.retry_after)
        if self.burst_429 > 0:
            self.burst_429 -= 1
            retry_after = 1.0 if self.retry_after is None else self.retry_after
            return self._refuse(plan, "burst_429", 429, retry_after)
        if self.timeout_next > 0:
            self.timeout_next -= 1
            plan.fault, plan.hang_s = "timeout_next", self.hang_s
            return plan
        if self.hang_after_commit_s:
            plan.fault, plan.hang_after_commit_s = "hang_after_commit_s", self.hang_after_commit_s
        if self.drop_after_commit > 0:
            self.drop_after_commit -= 1
            plan.fault, plan.drop_after_commit = "drop_after_commit", True
        elif self.commit_then_status > 0:
            self.commit_then_status -= 1
            plan.fault, plan.status_after_commit = "commit_then_status", self.fail_status or 502
        return plan

    def is_spent(self) -> bool:
        """Nothing left to apply: every counter used up and no rate, latency or hang."""
        return not (
            self.latency_ms
            or self.fail_next
            or self.error_rate
            or self.burst_429
            or self.timeout_next
            or self.drop_after_commit
            or self.commit_then_status
            or self.hang_after_commit_s
        )

    @staticmethod
    def _refuse(plan: Plan, name: str, status: int, retry_after: float | None) -> Plan:
        plan.fault, plan.status, plan.retry_after = name, status, retry_after
        return plan


# name -> (type, minimum, maximum) for POST /_shop/faults
FAULT_FIELDS: dict[str, tuple[type, float, float]] = {
    "latency_ms": (int, 0, 600_000),
    "fail_next": (int, 0, 1_000_000),
    "fail_status": (int, 100, 599),
    "retry_after": (float, 0, 86_400),
    "error_rate": (float, 0, 1),
    "burst_429": (int, 0, 1_000_000),
    "timeout_next": (int, 0, 1_000_000),
    "hang_s": (float, 0, 3_600),
    "drop_after_commit": (int, 0, 1_000_000),
    "commit_then_status": (int, 0, 1_000_000),
    "hang_after_commit_s": (float, 0, 3_600),
}


def _fault_value(name: str, value: Any) -> int | float:
    kind, low, high = FAULT_FIELDS[name]
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise Invalid(name, "must be a number")
    if kind is int and value != int(value):
        raise Invalid(name, "must be an integer")
    number = int(value) if kind is int else float(value)
    if not low <= number <= high:
        raise Invalid(name, f"must be between {low:g} and {high:g}")
    return number


def parse_fault(body: JSON) -> tuple[str, Fault | None]:
    """Validate a POST /_shop/faults body; a path alone (or only nulls) clears the fault."""
    path = _text(body, "path")
    if not path.startswith("/") or path.startswith("/_shop/"):
        raise Invalid("path", "must be a business path such as /orders")
    unknown = sorted(set(body) - set(FAULT_FIELDS) - {"path"})
    if unknown:
        raise Invalid(unknown[0], f"unknown fault field; known: {', '.join(FAULT_FIELDS)}")
    given = {
        name: _fault_value(name, value)
        for name, value in body.items()
        if name in FAULT_FIELDS and value is not None
    }
    return path, (Fault(**given) if given else None)


def _fault_json(fault: Fault) -> JSON:
    return {f.name: getattr(fault, f.name) for f in fields(Fault)}


# --- the server ---------------------------------------------------------------------------


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
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

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
            return {path: _fault_json(fault) for path, fault in self._faults.items()}

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
            return _not_found(f"no such control endpoint: {path}")
        allowed, action = route
        if method not in allowed:
            return Reply(405, {"error": "method_not_allowed"}, {"Allow": ", ".join(allowed)})
        try:
            return action(self, method, query, raw)
        except Invalid as exc:
            return _invalid(exc)


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
    path, fault = parse_fault(_body_object(raw))
    server.set_fault(path, fault)
    active = fault is not None and not fault.is_spent()
    return Reply(200, {"path": path, "fault": _fault_json(fault) if active else None})


CONTROL_ROUTES: dict[str, tuple[tuple[str, ...], Control]] = {
    "/_shop/health": (("GET",), _control_health),
    "/_shop/requests": (("GET",), _control_requests),
    "/_shop/state": (("GET",), _control_state),
    "/_shop/reset": (("POST",), _control_reset),
    "/_shop/faults": (("GET", "POST"), _control_faults),
}


# --- the request handler ------------------------------------------------------------------


class BodyError(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status


class ShopHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive; every reply carries Content-Length
    server: ShopServer
    # Idle keep-alive connections are closed after this; clients reconnect transparently.
    timeout = 120
    request_id = ""

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes; without NODELAY the second waits for the
        # client's delayed ACK (~40 ms) on every keep-alive request.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    do_PUT = do_PATCH = do_DELETE = do_POST

    def _dispatch(self) -> None:
        self.request_id = _new_id("req")
        url = urlsplit(self.path)
        try:
            raw = self._read_body()
        except BodyError as exc:
            # The rest of the body is still on the wire, so this connection cannot be reused.
            self.close_connection = True
            error = "too_large" if exc.status == 413 else "invalid"
            self._send(Reply(exc.status, {"error": error, "detail": str(exc)}))
            return
        try:
            if url.path.startswith("/_shop/"):
                self._send(self.server.control(self.command, url.path, url.query, raw))
            else:
                self._business(url.path, raw)
        except Exception:
            traceback.print_exc()
            self.close_connection = True
            self._send(Reply(500, {"error": "internal", "detail": "unexpected shop error"}))

    def _business(self, path: str, raw: bytes) -> None:
        entry = self._log_arrival(path, raw)
        plan = self.server.plan_for(path)
        entry["fault"] = plan.fault
        if plan.latency_s and self._pause(plan.latency_s):
            return self._drop()
        if plan.status is not None:
            return self._send(_fault_reply(plan), entry)
        if plan.hang_s is not None:
            self._pause(plan.hang_s)
            return self._drop()
        reply = self._execute(path, raw)
        if plan.hang_after_commit_s and self._pause(plan.hang_after_commit_s):
            return self._drop()
        if plan.drop_after_commit:
            return self._drop()
        if plan.status_after_commit is not None:
            reply = Reply(
                plan.status_after_commit, {"error": "injected_fault", "fault": plan.fault}
            )
        self._send(reply, entry)

    def _execute(self, path: str, raw: bytes) -> Reply:
        if path not in ROUTES:
            return _not_found(f"no such endpoint: {path}")
        if self.command != "POST":
            return Reply(405, {"error": "method_not_allowed"}, {"Allow": "POST"})
        try:
            body = _body_object(raw)
        except Invalid as exc:
            return _invalid(exc)
        return self.server.db.execute(path, body, self.headers.get("Idempotency-Key"))

    def _log_arrival(self, path: str, raw: bytes) -> JSON:
        try:
            body: Any = _parse_json(raw) if raw.strip() else None
        except (UnicodeDecodeError, ValueError):
            body = raw.decode("utf-8", "replace")
        headers: JSON = dict.fromkeys(RECORDED_HEADERS)
        headers |= {name.lower(): value for name, value in self.headers.items()}
        entry: JSON = {
            "request_id": self.request_id,
            "method": self.command,
            "path": path,
            "body": body,
            "headers": headers,
            "at": time.time(),
            "status": None,
            "fault": None,
        }
        self.server.log_arrival(entry)
        return entry

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._read_chunked()
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise BodyError(400, "Content-Length is not a number") from None
        if length < 0:
            raise BodyError(400, "Content-Length is negative")
        if length > MAX_BODY_BYTES:
            raise BodyError(413, "request body over 1 MiB")
        return self.rfile.read(length)

    def _read_chunked(self) -> bytes:
        chunks: list[bytes] = []
        total = 0
        while True:
            line = self.rfile.readline(1024)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise BodyError(400, "malformed chunked body") from None
            if size == 0:
                break
            total += size
            if total > MAX_BODY_BYTES:
                raise BodyError(413, "request body over 1 MiB")
            chunks.append(self.rfile.read(size))
            self.rfile.readline(8)  # the CRLF after each chunk
        while self.rfile.readline(8192).strip():  # trailers, up to the blank line
            pass
        return b"".join(chunks)

    def _pause(self, seconds: float) -> bool:
        """Sleep for a fault; True when the server is shutting down meanwhile."""
        return self.server.closing.wait(seconds)

    def _drop(self) -> None:
        """End the connection with a TCP reset and no response at all."""
        self.close_connection = True
        with suppress(OSError):
            # Linger 0 turns close() into an RST: the client's read fails at once with a
            # connection reset instead of waiting for a response that never comes.
            linger = struct.pack("ii", 1, 0)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
        # rfile holds a reference on the socket; the fd only really closes once it is closed.
        # wfile stays open: handle_one_request flushes it after we return.
        with suppress(OSError):
            self.rfile.close()
        with suppress(OSError):
            self.connection.close()

    def _send(self, reply: Reply, entry: JSON | None = None) -> None:
        if entry is not None:
            entry["status"] = reply.status
        payload = _dumps(reply.body)
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("X-Request-Id", self.request_id or _new_id("req"))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)
        except OSError:
            self.close_connection = True

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # http.server answers malformed requests with an HTML page; keep every answer JSON.
        self.close_connection = True
        self.request_id = _new_id("req")
        detail = message or self.responses.get(code, ("error",))[0]
        self._send(
            Reply(code, {"error": "bad_request" if code < 500 else "error", "detail": detail})
        )

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)


def _fault_reply(plan: Plan) -> Reply:
    headers = {}
    if plan.retry_after is not None:
        # Whole seconds where possible; RFC 9110 only allows integers there.
        seconds = plan.retry_after
        headers["Retry-After"] = str(int(seconds)) if seconds == int(seconds) else f"{seconds:g}"
    error = "rate_limited" if plan.status == 429 else "injected_fault"
    return Reply(plan.status or 503, {"error": error, "fault": plan.fault}, headers)


# --- entry points -------------------------------------------------------------------------


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


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m toolops.demo.shop", description="Demo downstream shop for ToolOps."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9000, help="0 picks a free port")
    parser.add_argument("--db", default=None, help="SQLite file (default: in memory)")
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    try:
        server, base_url = start_shop(args.port, args.db, host=args.host, verbose=args.verbose)
    except OSError as exc:
        print(f"shop: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(f"shop listening on {base_url}", flush=True)
    # A timed wait keeps the main thread responsive to signals on every platform.
    while not stop.wait(0.5):
        pass
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
