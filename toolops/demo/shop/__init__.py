"""The demo downstream shop: inventory, orders, payments and notifications over HTTP.

A standalone, standard-library-only service that ToolOps' demo and tests call as real
downstream tools. Faults (latency, errors, 429 bursts, hangs, responses lost after the
commit) are switched per path at run time through the control API under ``/_shop/``.

    python -m toolops.demo.shop --port 9000 --db var/shop.sqlite3

Only inventory writes honour ``Idempotency-Key``; orders and payments rely on their
unique indexes (client_reference, order_id) as the backstop, which is exactly the case
ToolOps has to reconcile with a query.

The modules, by area: `replies` (JSON replies and field checks), `handlers` (the business
endpoints and ROUTES), `storage` (ShopDB, the schema and seed data), `faults` (fault
injection), `connection` (the HTTP request handler) and `server` (ShopServer, the control
API and start_shop).
"""

from __future__ import annotations

from toolops.demo.shop.connection import ShopHandler
from toolops.demo.shop.faults import FAULT_FIELDS, Fault, Plan, parse_fault
from toolops.demo.shop.handlers import IDEMPOTENT_PATHS, ROUTES
from toolops.demo.shop.replies import JSON, Invalid, Reply
from toolops.demo.shop.server import CONTROL_ROUTES, ShopServer, start_shop
from toolops.demo.shop.storage import PRODUCTS, SCHEMA, SEED_STOCK, ShopDB

__all__ = [
    "CONTROL_ROUTES",
    "FAULT_FIELDS",
    "IDEMPOTENT_PATHS",
    "JSON",
    "PRODUCTS",
    "ROUTES",
    "SCHEMA",
    "SEED_STOCK",
    "Fault",
    "Invalid",
    "Plan",
    "Reply",
    "ShopDB",
    "ShopHandler",
    "ShopServer",
    "parse_fault",
    "start_shop",
]
