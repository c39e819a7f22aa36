"""For the sensitive-data tests: a real downstream over HTTP that echoes what it receives
(in its results and in its errors, as careless services do), the catalog of tools pointed
at it beside the demo shop's, and the values that must never leak."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Shop, write_catalog
from toolops.tools import registry

EMAIL = "ann.lee@example.com"
CARD = "4111 1111 1111 1111"  # Luhn-valid, with spaces
API_KEY = "sk_live_9fQ2xVb7LmT4"
# Only ever in a downstream's result (`/account` answers it), never in args.
IBAN = "DE89370400440532013000"
# How each may show up elsewhere: the card's digits without their spaces too.
SECRETS = (EMAIL, CARD, CARD.replace(" ", ""), API_KEY, IBAN)
SENSITIVE_ARGS = {"contact": EMAIL, "payment": CARD, "api_key": API_KEY}

CATALOG = """
[[tool]]
name = "save_profile"
kind = "idempotent_write"
description = "Save a customer profile; the service echoes it."
url = "{echo}/echo"
max_attempts = 3
backoff_base_s = 0.01
params_schema = {{ type = "object" }}
redact = ["nickname", "address.street"]

[[tool]]
name = "read_profile"
kind = "read"
description = "Read a profile back; the service echoes the request."
url = "{echo}/echo"
params_schema = {{ type = "object" }}

[[tool]]
name = "reject_profile"
kind = "idempotent_write"
description = "A service that refuses, quoting the request in its error."
url = "{echo}/reject"
max_attempts = 1
params_schema = {{ type = "object" }}

[[tool]]
name = "strict_profile"
kind = "idempotent_write"
description = "Args the schema refuses, quoting the value."
url = "{echo}/echo"
params_schema = {{ type = "object", properties = {{ api_key = {{ type = "integer" }} }} }}

[[tool]]
name = "subscribe"
kind = "compensable_write"
description = "Subscribe; undone by unsubscribe with values from its args and result."
url = "{echo}/echo"
idempotency_header = true
compensation = {{ tool = "unsubscribe", args = {{ contact = "$.args.contact", \
api_key = "$.args.api_key", card = "$.result.received.payment" }} }}
params_schema = {{ type = "object" }}

[[tool]]
name = "unsubscribe"
kind = "idempotent_write"
internal = true
description = "Undo a subscription."
url = "{echo}/undo"
params_schema = {{ type = "object" }}

[[tool]]
name = "open_account"
kind = "idempotent_write"
description = "Open an account; the result's iban breaks the result schema."
url = "{echo}/account"
params_schema = {{ type = "object" }}
result_schema = {{ type = "object", properties = {{ iban = {{ type = "integer" }} }} }}

[[tool]]
name = "pay"
kind = "irreversible"
requires_approval = false
description = "An unsafe write whose outcome is found by the customer's e-mail and card."
url = "{echo}/pay"
max_attempts = 1
query = "find_payment"
business_key = ["contact", "payment"]
params_schema = {{ type = "object" }}

[[tool]]
name = "find_payment"
kind = "read"
internal = true
description = "Find a payment by the customer's e-mail and card."
url = "{echo}/find"
max_attempts = 1
params_schema = {{ type = "object" }}
"""


class Echo:
    """Answers 200 with `{"received": body, "note": "saved <body>"}` (`/account`: with an
    IBAN of its own), or — per path, queued with `plan` — another status with the body
    quoted in its `detail`."""

    def __init__(self) -> None:
        self.received: list[tuple[str, Any]] = []
        self.plans: dict[str, list[int]] = {}
        self.lock = threading.Lock()
        echo = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw or b"{}")
                with echo.lock:
                    echo.received.append((self.path, body))
                    plan = echo.plans.get(self.path) or []
                    status = plan.pop(0) if plan else (422 if self.path == "/reject" else 200)
                text = json.dumps(body)
                if status == 200:
                    reply: dict[str, Any] = {"received": body, "note": f"saved {text}"}
                    if self.path == "/account":
                        reply["iban"] = IBAN
                else:
                    reply = {"detail": f"cannot accept {text}"}
                payload = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def plan(self, path: str, *statuses: int) -> None:
        with self.lock:
            self.plans[path] = list(statuses)

    def bodies(self, path: str) -> list[Any]:
        with self.lock:
            return [body for p, body in self.received if p == path]

    def reset(self) -> None:
        with self.lock:
            self.received.clear()
            self.plans.clear()


# Named so, the test modules import these without shadowing their `echo` arguments.
@pytest.fixture(scope="session", name="echo_server")
def echo_server_fixture() -> Iterator[Echo]:
    server = Echo()
    yield server
    server.server.shutdown()


@pytest.fixture(name="echo")
def echo_fixture(echo_server: Echo, shop: Shop, settings: Any) -> Iterator[Echo]:
    """A clean echo downstream, with its tools added to the demo catalog (at the shop)."""
    echo_server.reset()
    path = write_catalog(shop.url, CATALOG.format(echo=echo_server.url))
    settings.TOOLOPS_TOOLS_FILE = str(path)
    registry.reset()
    yield echo_server
    registry.reset()
    Path(path).unlink(missing_ok=True)


def leaks(text: str) -> list[str]:
    """The secrets `text` gives away."""
    return [secret for secret in SECRETS if secret in text]
