"""The shop's state: one SQLite database, its schema and the seed stock and catalogue.

Every business request runs in one ``BEGIN IMMEDIATE`` transaction under a lock, so its
effect and the reply saved for its ``Idempotency-Key`` commit together or not at all.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from toolops.demo.shop.handlers import IDEMPOTENT_PATHS, ROUTES
from toolops.demo.shop.replies import JSON, Invalid, Reply, invalid_reply

SEED_STOCK = {"A12": 50, "B7": 5, "C3": 0, "D9": 100}
# The product catalogue behind POST /catalog/search: fixed, never changed by a request.
PRODUCTS = {
    "A12": "Espresso machine",
    "B7": "Coffee grinder",
    "C3": "Milk frother",
    "D9": "Coffee beans, 1 kg",
}


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
                return invalid_reply(exc)
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
