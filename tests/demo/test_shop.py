"""The demo shop on its own: business rules, the unique-index backstop and every fault."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from email.message import Message
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from toolops.demo.shop import ROUTES, SEED_STOCK, start_shop

CATALOG = Path(__file__).resolve().parents[2] / "toolops" / "demo" / "catalog.toml"
DEMO_PREFIX = "http://127.0.0.1:9000"
ORDER = {"sku": "A12", "qty": 1, "amount": "199.00", "client_reference": "ref-1"}
# Errors a client can see when the shop drops or resets the connection.
CONNECTION_ERRORS = (urllib.error.URLError, ConnectionError, http.client.HTTPException)


class _AnyText:
    """Equal to any non-empty string, for details whose wording is free."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and bool(other)


ANY_TEXT = _AnyText()


class Shop:
    """A running shop and a tiny JSON client for it."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def call(
        self,
        path: str,
        body: Any = None,
        *,
        method: str = "POST",
        headers: dict[str, str] | None = None,
        timeout: float = 5.0,
        raw: bytes | None = None,
    ) -> tuple[int, Any, Message]:
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base_url + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json", **(headers or {})},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, json.loads(response.read()), response.headers
        except urllib.error.HTTPError as error:
            with error:
                return error.code, json.loads(error.read()), error.headers

    def post(self, path: str, body: Any, **kwargs: Any) -> tuple[int, Any]:
        status, payload, _ = self.call(path, body, **kwargs)
        return status, payload

    def fault(self, **fault: Any) -> None:
        status, payload = self.post("/_shop/faults", fault)
        assert status == 200, payload

    def state(self) -> Any:
        return self.call("/_shop/state", method="GET")[1]

    def requests(self, path: str = "") -> list[Any]:
        query = f"?path={path}" if path else ""
        return self.call(f"/_shop/requests{query}", method="GET")[1]["requests"]


@pytest.fixture
def shop() -> Iterator[Shop]:
    server, base_url = start_shop()
    yield Shop(base_url)
    server.shutdown()


def test_it_reports_health_and_seeds_stock(shop: Shop) -> None:
    assert shop.call("/_shop/health", method="GET")[:2] == (200, {"ok": True})
    assert shop.state()["stock"] == SEED_STOCK
    assert shop.post("/inventory/stock", {"sku": "B7"}) == (200, {"sku": "B7", "available": 5})
    assert shop.post("/inventory/stock", {"sku": "ZZ"})[0] == 404


def test_it_answers_json_with_a_request_id_and_content_length(shop: Shop) -> None:
    _, _, first = shop.call("/inventory/stock", {"sku": "A12"})
    _, _, second = shop.call("/inventory/stock", {"sku": "A12"})

    assert first["Content-Type"] == "application/json"
    assert int(first["Content-Length"]) > 0
    assert first["X-Request-Id"] and first["X-Request-Id"] != second["X-Request-Id"]
    assert shop.call("/nowhere", {})[:2] == (404, {"error": "not_found", "detail": ANY_TEXT})


def test_it_refuses_a_duplicate_client_reference_with_the_unique_index(shop: Shop) -> None:
    status, order = shop.post("/orders", ORDER)
    again, duplicate = shop.post("/orders", {**ORDER, "qty": 3})

    assert status == 201
    assert order["status"] == "created" and order["amount"] == "199.00"
    assert (again, duplicate) == (409, {"error": "duplicate", "order_id": order["order_id"]})
    assert shop.state()["counts"]["orders"] == 1
    assert shop.post("/orders/lookup", {"client_reference": "ref-1"}) == (200, order)
    assert shop.post("/orders/lookup", {"client_reference": "nope"})[0] == 404


def test_it_cancels_an_order_idempotently(shop: Shop) -> None:
    _, order = shop.post("/orders", ORDER)

    for _ in range(2):
        status, cancelled = shop.post("/orders/cancel", {"order_id": order["order_id"]})
        assert (status, cancelled["status"]) == (200, "cancelled")
    assert shop.post("/orders/cancel", {"order_id": "ord_unknown"})[0] == 404


def test_it_replays_a_reservation_for_a_repeated_idempotency_key(shop: Shop) -> None:
    key = {"Idempotency-Key": "k-1"}
    status, first, _ = shop.call("/inventory/reservations", {"sku": "B7", "qty": 2}, headers=key)
    again, second, headers = shop.call(
        "/inventory/reservations", {"sku": "B7", "qty": 2}, headers=key
    )

    assert status == again == 200
    assert second == first and first["status"] == "reserved"
    assert headers["Idempotent-Replayed"] == "true"
    assert shop.state()["stock"]["B7"] == 3
    assert shop.state()["counts"]["reservations"] == 1
    # Another key is another reservation.
    shop.call("/inventory/reservations", {"sku": "B7", "qty": 2}, headers={"Idempotency-Key": "2"})
    assert shop.state()["stock"]["B7"] == 1


def test_it_keeps_one_effect_under_concurrent_duplicates(shop: Shop) -> None:
    key = {"Idempotency-Key": "same"}

    def reserve() -> int:
        return shop.post("/inventory/reservations", {"sku": "D9", "qty": 1}, headers=key)[0]

    with ThreadPoolExecutor(max_workers=8) as pool:
        reserved = list(pool.map(lambda _: reserve(), range(8)))
        ordered = list(pool.map(lambda _: shop.post("/orders", ORDER)[0], range(8)))

    assert reserved == [200] * 8
    assert sorted(ordered) == [201] + [409] * 7
    counts = shop.state()["counts"]
    assert (counts["reservations"], counts["orders"]) == (1, 1)
    assert shop.state()["stock"]["D9"] == 99


def test_it_refuses_a_reservation_beyond_stock(shop: Shop) -> None:
    status, body = shop.post("/inventory/reservations", {"sku": "C3", "qty": 1})

    assert (status, body["error"]) == (409, "insufficient_stock")
    assert shop.post("/inventory/reservations", {"sku": "ZZ", "qty": 1})[0] == 404
    assert shop.state()["counts"]["reservations"] == 0


def test_it_returns_released_stock_once(shop: Shop) -> None:
    _, reservation = shop.post("/inventory/reservations", {"sku": "D9", "qty": 10})
    release = {"reservation_id": reservation["reservation_id"]}

    for _ in range(2):
        status, body = shop.post("/inventory/reservations/release", release)
        assert (status, body["status"]) == (200, "released")
    assert shop.state()["stock"]["D9"] == 100
    assert shop.post("/inventory/reservations/release", {"reservation_id": "res_x"})[0] == 404


def test_it_charges_once_per_order_and_refunds_idempotently(shop: Shop) -> None:
    status, charge = shop.post("/payments/charges", {"order_id": "o-1", "amount": 19.5})
    again, duplicate = shop.post("/payments/charges", {"order_id": "o-1", "amount": "19.50"})

    assert (status, charge["status"], charge["amount"]) == (200, "captured", "19.5")
    assert (again, duplicate) == (409, {"error": "duplicate", "charge_id": charge["charge_id"]})
    assert shop.post("/payments/charges/lookup", {"order_id": "o-1"}) == (200, charge)
    assert shop.post("/payments/charges/lookup", {"order_id": "o-2"})[0] == 404

    first = shop.post("/payments/refunds", {"charge_id": charge["charge_id"]})
    second = shop.post("/payments/refunds", {"charge_id": charge["charge_id"]})
    assert first == second and first[1]["status"] == "refunded"
    assert shop.state()["counts"] == {
        "reservations": 0,
        "orders": 0,
        "charges": 1,
        "refunds": 1,
        "notifications": 0,
    }
    assert shop.post("/payments/refunds", {"charge_id": "ch_unknown"})[0] == 404


def test_it_accepts_the_business_facts_an_agent_sends_along(shop: Shop) -> None:
    # The demo agent's orders and charges carry currency, customer and e-mail (the
    # catalog's summaries title calls with them); the shop takes them and ignores them.
    facts = {"currency": "EUR", "customer": "cus_4821", "email": "customer@example.com"}
    status, order = shop.post("/orders", {**ORDER, **facts})
    assert status == 201 and order["status"] == "created", order

    status, charge = shop.post(
        "/payments/charges", {"order_id": order["order_id"], "amount": "199.00", **facts}
    )
    assert (status, charge["status"], charge["order_id"]) == (200, "captured", order["order_id"])
    assert shop.state()["counts"]["charges"] == 1


def test_it_searches_products_by_name(shop: Shop) -> None:
    status, found = shop.post("/catalog/search", {"q": "  Coffee "})
    _, beans = shop.post("/catalog/search", {"q": "beans coffee"})
    _, none = shop.post("/catalog/search", {"q": "teapot"})

    assert status == 200
    assert [item["sku"] for item in found["items"]] == ["B7", "D9"]
    assert found["items"][0] == {"sku": "B7", "name": "Coffee grinder"}
    assert [item["sku"] for item in beans["items"]] == ["D9"]
    assert none == {"items": []}
    assert shop.post("/catalog/search", {"q": ""})[1]["field"] == "q"
    # Searching changes nothing, and a reset keeps the product catalogue.
    assert shop.state()["stock"] == SEED_STOCK
    assert shop.post("/_shop/reset", {})[0] == 200
    assert len(shop.post("/catalog/search", {"q": "coffee"})[1]["items"]) == 2


def test_it_sends_a_notification(shop: Shop) -> None:
    status, body = shop.post("/notifications", {"to": "ann@example.com", "message": "Shipped"})

    assert (status, body["status"]) == (200, "sent") and body["notification_id"]
    assert shop.state()["notifications"][0]["recipient"] == "ann@example.com"


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/orders", {"sku": "A12", "qty": 1, "client_reference": "r"}, "amount"),
        ("/orders", {**ORDER, "qty": "two"}, "qty"),
        ("/orders", {**ORDER, "qty": 0}, "qty"),
        ("/orders", {**ORDER, "amount": "lots"}, "amount"),
        ("/orders", {**ORDER, "amount": True}, "amount"),
        ("/orders", {"sku": "A12", "qty": 1, "amount": "1"}, "client_reference"),
        ("/inventory/reservations", {"sku": 12, "qty": 1}, "sku"),
        ("/payments/charges", {"amount": "1.00"}, "order_id"),
        ("/notifications", {"to": "x"}, "message"),
        ("/orders", [1, 2], "body"),
    ],
)
def test_it_rejects_bad_input_naming_the_field(
    shop: Shop, path: str, body: Any, field: str
) -> None:
    status, error = shop.post(path, body)

    assert (status, error["error"], error["field"]) == (400, "invalid", field)
    assert field in error["detail"]
    assert shop.state()["counts"]["orders"] == 0


def test_it_rejects_malformed_json_and_nan(shop: Shop) -> None:
    assert shop.call("/orders", raw=b"{nope")[0] == 400
    assert shop.call("/orders", raw=b'{"amount": NaN}')[0] == 400


def test_it_answers_fail_next_with_retry_after_and_no_effect(shop: Shop) -> None:
    shop.fault(path="/orders", fail_next=2, retry_after=3)

    results = [shop.call("/orders", ORDER) for _ in range(3)]

    assert [status for status, _, _ in results] == [503, 503, 201]
    assert results[0][2]["Retry-After"] == "3"
    assert shop.state()["counts"]["orders"] == 1


def test_it_uses_the_given_fail_status(shop: Shop) -> None:
    shop.fault(path="/orders", fail_next=1, fail_status=500)

    status, body, headers = shop.call("/orders", ORDER)

    assert (status, body["fault"]) == (500, "fail_next")
    assert headers["Retry-After"] is None


def test_it_answers_a_burst_of_429(shop: Shop) -> None:
    shop.fault(path="/inventory/stock", burst_429=2, retry_after=1)

    results = [shop.call("/inventory/stock", {"sku": "A12"}) for _ in range(3)]

    assert [status for status, _, _ in results] == [429, 429, 200]
    assert results[1][2]["Retry-After"] == "1"


def test_it_fails_every_request_at_error_rate_one(shop: Shop) -> None:
    shop.fault(path="/notifications", error_rate=1.0, fail_status=504)

    statuses = [shop.post("/notifications", {"to": "a", "message": "m"})[0] for _ in range(3)]

    assert statuses == [504, 504, 504]
    assert shop.state()["counts"]["notifications"] == 0


def test_it_hangs_timeout_next_without_effect(shop: Shop) -> None:
    shop.fault(path="/orders", timeout_next=1, hang_s=0.4)

    with pytest.raises((TimeoutError, *CONNECTION_ERRORS)):
        shop.call("/orders", ORDER, timeout=0.15)

    assert shop.state()["counts"]["orders"] == 0
    assert shop.post("/orders", ORDER)[0] == 201


def test_it_drops_the_response_after_commit(shop: Shop) -> None:
    shop.fault(path="/orders", drop_after_commit=1)

    started = time.monotonic()
    with pytest.raises(CONNECTION_ERRORS):
        shop.call("/orders", ORDER, timeout=3)

    assert time.monotonic() - started < 1, "the client must see a reset, not a hang"
    assert shop.state()["counts"]["orders"] == 1
    assert shop.post("/orders/lookup", {"client_reference": "ref-1"})[0] == 200
    # The retry a naive client would make hits the unique index.
    assert shop.post("/orders", ORDER)[1]["error"] == "duplicate"


def test_it_drops_a_keep_alive_connection_too(shop: Shop) -> None:
    url = urlsplit(shop.base_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=3)
    conn.request("POST", "/inventory/stock", body=b'{"sku": "A12"}')
    assert conn.getresponse().read()
    shop.fault(path="/inventory/reservations", drop_after_commit=1)

    conn.request("POST", "/inventory/reservations", body=b'{"sku": "A12", "qty": 5}')
    with pytest.raises(CONNECTION_ERRORS):
        conn.getresponse()

    conn.close()
    assert shop.state()["stock"]["A12"] == 45


def test_it_answers_commit_then_status_after_the_side_effect(shop: Shop) -> None:
    shop.fault(path="/payments/charges", commit_then_status=1)

    status, body = shop.post("/payments/charges", {"order_id": "o-9", "amount": "5"})

    assert (status, body["fault"]) == (502, "commit_then_status")
    assert shop.state()["counts"]["charges"] == 1
    assert shop.post("/payments/charges/lookup", {"order_id": "o-9"})[0] == 200


def test_it_hangs_after_commit(shop: Shop) -> None:
    shop.fault(path="/orders", hang_after_commit_s=0.4)

    with pytest.raises((TimeoutError, *CONNECTION_ERRORS)):
        shop.call("/orders", ORDER, timeout=0.15)

    assert shop.state()["counts"]["orders"] == 1


def test_it_adds_latency(shop: Shop) -> None:
    shop.fault(path="/inventory/stock", latency_ms=150)

    started = time.monotonic()
    assert shop.post("/inventory/stock", {"sku": "A12"})[0] == 200

    assert time.monotonic() - started >= 0.15


def test_it_plays_counters_one_after_another_then_clears(shop: Shop) -> None:
    shop.fault(path="/orders/lookup", fail_next=1, burst_429=1)
    lookup = {"client_reference": "x"}

    assert [shop.post("/orders/lookup", lookup)[0] for _ in range(3)] == [503, 429, 404]
    assert shop.call("/_shop/faults", method="GET")[1] == {"faults": {}}, "spent faults go"
    shop.fault(path="/orders/lookup", fail_next=5)
    shop.fault(path="/orders/lookup")
    assert shop.post("/orders/lookup", lookup)[0] == 404
    assert shop.call("/_shop/faults", method="GET")[1] == {"faults": {}}


def test_it_rejects_a_bad_fault(shop: Shop) -> None:
    assert shop.post("/_shop/faults", {"path": "/orders", "fail_nxt": 1})[1]["field"] == "fail_nxt"
    assert shop.post("/_shop/faults", {"path": "/orders", "error_rate": 2})[0] == 400
    assert shop.post("/_shop/faults", {"fail_next": 1})[1]["field"] == "path"


def test_it_logs_requests_that_faulted(shop: Shop) -> None:
    shop.fault(path="/orders", fail_next=1, drop_after_commit=1)
    headers = {
        "Idempotency-Key": "key-1",
        "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "X-Toolops-Run-Id": "r-1",
        "X-Toolops-Tool-Call-Id": "tc-1",
        "X-Toolops-Attempt": "1",
    }
    shop.call("/orders", ORDER, headers=headers)
    with pytest.raises(CONNECTION_ERRORS):
        shop.call("/orders", ORDER, headers={**headers, "X-Toolops-Attempt": "2"})
    shop.post("/inventory/stock", {"sku": "A12"})

    logged = shop.requests("/orders")

    assert [(r["status"], r["fault"]) for r in logged] == [
        (503, "fail_next"),
        (None, "drop_after_commit"),
    ]
    first = logged[0]
    assert (first["method"], first["path"], first["body"]) == ("POST", "/orders", ORDER)
    assert {name: first["headers"][name] for name in ["idempotency-key", "x-toolops-run-id"]} == {
        "idempotency-key": "key-1",
        "x-toolops-run-id": "r-1",
    }
    assert first["headers"]["traceparent"] == headers["traceparent"]
    assert [r["headers"]["x-toolops-attempt"] for r in logged] == ["1", "2"]
    assert logged[0]["at"] <= logged[1]["at"]
    assert len(shop.requests()) == 3, "control requests are not logged"


def test_it_resets_data_faults_and_log(shop: Shop) -> None:
    shop.post("/orders", ORDER)
    shop.post("/inventory/reservations", {"sku": "B7", "qty": 5})
    shop.fault(path="/orders", fail_next=3)

    assert shop.post("/_shop/reset", {}) == (200, {"ok": True})

    state = shop.state()
    assert state["stock"] == SEED_STOCK
    assert set(state["counts"].values()) == {0}
    assert shop.requests() == []
    assert shop.post("/orders", ORDER)[0] == 201


def test_it_keeps_data_in_a_db_file_across_restarts(tmp_path: Path) -> None:
    db = str(tmp_path / "shop.sqlite3")
    server, base_url = start_shop(db_path=db)
    Shop(base_url).post("/inventory/reservations", {"sku": "B7", "qty": 2})
    server.shutdown()

    server, base_url = start_shop(db_path=db)
    try:
        assert Shop(base_url).state()["stock"]["B7"] == 3
    finally:
        server.shutdown()


def test_it_keeps_connections_alive_without_delayed_ack_stalls(shop: Shop) -> None:
    url = urlsplit(shop.base_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=3)
    started = time.monotonic()
    for _ in range(30):
        conn.request("POST", "/inventory/stock", body=b'{"sku": "A12"}')
        response = conn.getresponse()
        assert len(response.read()) == int(response.headers["Content-Length"])
    elapsed = time.monotonic() - started
    conn.close()

    # With Nagle and delayed ACK each request would wait ~40 ms (1.2 s in all).
    assert elapsed < 0.6
    assert len(shop.requests()) == 30


def test_it_runs_from_the_command_line() -> None:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolops.demo.shop", "--port", "0"],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("shop listening on http://127.0.0.1:")
        assert Shop(line.rsplit(" ", 1)[1]).call("/_shop/health", method="GET")[0] == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


# The circuit-breaker demo's tool: the demo fails it with a fault on a path of its own.
ALWAYS_DOWN = {"legacy_inventory"}


def test_it_declares_a_consistent_catalog() -> None:
    tools = tomllib.loads(CATALOG.read_text())["tool"]
    names = {tool["name"] for tool in tools}

    assert names == {
        "query_stock",
        "reserve_stock",
        "release_stock",
        "create_order",
        "cancel_order",
        "query_order",
        "charge",
        "get_charge",
        "refund",
        "send_notification",
        "send_voucher",
        "search_products",
        "legacy_inventory",
    }
    for tool in tools:
        assert {"name", "kind", "url", "params_schema", "description"} <= set(tool), tool["name"]
        assert tool["url"].startswith(DEMO_PREFIX + "/"), tool["name"]
        path = tool["url"].removeprefix(DEMO_PREFIX)
        if tool["name"] in ALWAYS_DOWN:
            # Its own path, which the shop does not serve: only a fault answers it.
            assert path not in ROUTES, tool["name"]
            assert all(t["url"] != tool["url"] for t in tools if t is not tool)
        else:
            assert path in ROUTES, tool["name"]
        assert tool["params_schema"]["type"] == "object"
        for linked in (tool.get("compensation", {}).get("tool"), tool.get("query")):
            assert linked is None or linked in names, f"{tool['name']} names unknown {linked}"
        if tool["kind"] == "compensable_write":
            assert "compensation" in tool, tool["name"]
