"""Python tools that ship with ToolOps, registered in code beside the TOML catalog."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from .registry import python_tool


@python_tool(
    name="quote_total",
    kind="read",
    description="Compute an order total from a unit price and a quantity, with tax.",
    params_schema={
        "type": "object",
        "required": ["unit_price", "qty"],
        "properties": {
            "unit_price": {"type": "string", "format": "decimal", "x-decimal-places": 2},
            "qty": {"type": "integer", "minimum": 1},
            "tax_rate": {"type": "number", "minimum": 0, "maximum": 1},
        },
        "additionalProperties": False,
    },
    timeout_s=1.0,
)
def quote_total(*, unit_price: str, qty: int, tax_rate: float = 0.0) -> dict[str, Any]:
    subtotal = Decimal(unit_price) * qty
    tax = (subtotal * Decimal(str(tax_rate))).quantize(Decimal("0.01"))
    return {"subtotal": f"{subtotal:.2f}", "tax": f"{tax:.2f}", "total": f"{subtotal + tax:.2f}"}
