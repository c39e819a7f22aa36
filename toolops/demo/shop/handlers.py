"""The shop's business endpoints: one function per path, each run inside one locked
transaction by `storage.ShopDB.execute`.

Only inventory writes honour ``Idempotency-Key``; orders and payments rely on their
unique indexes (client_reference, order_id) as the backstop, which is exactly the case
ToolOps has to reconcile with a query.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

from toolops.demo.shop.replies import (
    JSON,
    Invalid,
    Reply,
    amount_field,
    new_id,
    not_found,
    optional_text_field,
    quantity_field,
    text_field,
)

Handler = Callable[[sqlite3.Connection, JSON], Reply]


def stock_query(conn: sqlite3.Connection, body: JSON) -> Reply:
    sku = text_field(body, "sku")
    row = conn.execute("SELECT available FROM stock WHERE sku = ?", (sku,)).fetchone()
    if row is None:
        return not_found(f"unknown sku {sku}")
    return Reply(200, {"sku": sku, "available": row["available"]})


def product_search(conn: sqlite3.Connection, body: JSON) -> Reply:
    """Products whose name contains every word of `q` (case-insensitive); none is not 404."""
    words = text_field(body, "q").lower().split()
    rows = conn.execute("SELECT sku, name FROM products ORDER BY sku").fetchall()
    items = [dict(r) for r in rows if all(w in r["name"].lower() for w in words)]
    return Reply(200, {"items": items})


def reservation_create(conn: sqlite3.Connection, body: JSON) -> Reply:
    sku, qty = text_field(body, "sku"), quantity_field(body, "qty")
    row = conn.execute("SELECT available FROM stock WHERE sku = ?", (sku,)).fetchone()
    if row is None:
        return not_found(f"unknown sku {sku}")
    if row["available"] < qty:
        return Reply(
            409, {"error": "insufficient_stock", "sku": sku, "available": row["available"]}
        )
    reservation_id = new_id("res")
    conn.execute("UPDATE stock SET available = available - ? WHERE sku = ?", (qty, sku))
    conn.execute(
        "INSERT INTO reservations VALUES (?, ?, ?, 'reserved', ?)",
        (reservation_id, sku, qty, time.time()),
    )
    return Reply(
        200, {"reservation_id": reservation_id, "sku": sku, "qty": qty, "status": "reserved"}
    )


def reservation_release(conn: sqlite3.Connection, body: JSON) -> Reply:
    reservation_id = text_field(body, "reservation_id")
    row = conn.execute(
        "SELECT sku, qty, status FROM reservations WHERE reservation_id = ?", (reservation_id,)
    ).fetchone()
    if row is None:
        return not_found(f"unknown reservation {reservation_id}")
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
    sku, qty = text_field(body, "sku"), quantity_field(body, "qty")
    amount, reference = amount_field(body, "amount"), text_field(body, "client_reference")
    order_id = new_id("ord")
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
    order_id = text_field(body, "order_id")
    if _order(conn, "order_id", order_id) is None:
        return not_found(f"unknown order {order_id}")
    conn.execute("UPDATE orders SET status = 'cancelled' WHERE order_id = ?", (order_id,))
    return Reply(200, _order(conn, "order_id", order_id) or {})


def order_lookup(conn: sqlite3.Connection, body: JSON) -> Reply:
    order_id = optional_text_field(body, "order_id")
    reference = optional_text_field(body, "client_reference")
    if order_id is None and reference is None:
        raise Invalid("client_reference", "is required (or order_id)")
    order = (
        _order(conn, "order_id", order_id)
        if order_id is not None
        else _order(conn, "client_reference", reference or "")
    )
    return Reply(200, order) if order is not None else not_found("no such order")


def _charge(conn: sqlite3.Connection, column: str, value: str) -> JSON | None:
    row = conn.execute(
        f"SELECT {CHARGE_COLUMNS} FROM charges WHERE {column} = ?", (value,)
    ).fetchone()
    return dict(row) if row is not None else None


def charge_create(conn: sqlite3.Connection, body: JSON) -> Reply:
    order_id, amount = text_field(body, "order_id"), amount_field(body, "amount")
    reference = optional_text_field(body, "client_reference")
    charge_id = new_id("ch")
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
    order_id = optional_text_field(body, "order_id")
    reference = optional_text_field(body, "client_reference")
    if order_id is None and reference is None:
        raise Invalid("order_id", "is required (or client_reference)")
    charge = (
        _charge(conn, "order_id", order_id)
        if order_id is not None
        else _charge(conn, "client_reference", reference or "")
    )
    return Reply(200, charge) if charge is not None else not_found("no such charge")


def refund_create(conn: sqlite3.Connection, body: JSON) -> Reply:
    charge_id = text_field(body, "charge_id")
    charge = _charge(conn, "charge_id", charge_id)
    if charge is None:
        return not_found(f"unknown charge {charge_id}")
    # UNIQUE(charge_id) makes a second refund of the same charge a no-op that reports the first.
    conn.execute(
        "INSERT OR IGNORE INTO refunds VALUES (?, ?, ?, ?)",
        (new_id("re"), charge_id, charge["amount"], time.time()),
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
    recipient, message = text_field(body, "to"), text_field(body, "message")
    notification_id = new_id("ntf")
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
