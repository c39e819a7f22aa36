"""A catalog with the demo's facts (summary, display) for the approval and ticket pages'
tests: a charge that only a refund undoes, and a message that nothing undoes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolops.tools import registry

FACTS_CATALOG = """
[[tool]]
name = "charge"
kind = "irreversible"
description = "Charge the customer for an order."
url = "http://127.0.0.1:9/payments/charges"
requires_approval = true
compensation = { tool = "refund", args = { charge_id = "$.result.charge_id" } }
summary = "Charge {amount} {currency} to customer {customer} for order {order_id}"
display = ["amount", "currency", "customer", "order_id", "charge_id"]
params_schema = { type = "object" }

[[tool]]
name = "refund"
kind = "idempotent_write"
internal = true
description = "Refund a charge."
url = "http://127.0.0.1:9/payments/refunds"
summary = "Refund charge {charge_id}"
display = ["charge_id"]
params_schema = { type = "object" }

[[tool]]
name = "create_order"
kind = "compensable_write"
description = "Create an order."
url = "http://127.0.0.1:9/orders"
compensation = { tool = "cancel_order", args = { order_id = "$.result.order_id" } }
summary = "Order {qty} × {sku}"
display = ["sku", "qty", "order_id"]
params_schema = { type = "object" }

[[tool]]
name = "cancel_order"
kind = "idempotent_write"
internal = true
description = "Cancel an order."
url = "http://127.0.0.1:9/orders/cancel"
params_schema = { type = "object" }

[[tool]]
name = "send_notification"
kind = "irreversible"
description = "Send a message to the customer."
url = "http://127.0.0.1:9/notifications"
summary = "Send a message to {to}"
params_schema = { type = "object" }
"""

CHARGE = {"order_id": "ord_1", "amount": "89.00", "currency": "EUR", "customer": "cus_42"}


@pytest.fixture
def facts_catalog(settings: Any, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """FACTS_CATALOG as this test's tool catalog."""
    path = tmp_path / "facts-catalog.toml"
    path.write_text(FACTS_CATALOG)
    settings.TOOLOPS_TOOLS_FILE = str(path)
    settings.TOOLOPS_POLICY_CACHE_S = 0
    registry.reset()
    yield registry.load()
    registry.reset()
