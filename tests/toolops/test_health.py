"""`/healthz` and `/readyz` (toolops/probes/), as a balancer sees them: real uvicorn web
processes, real PostgreSQL (behind a fault proxy when it must stop answering), real
Redis servers. Each not-ready answer names the check that failed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.db import connection

from tests.conftest import Shop
from tests.faults.proxy import FaultProxy
from tests.faults.redis_proc import RedisServer, needs_redis_server
from tests.redisdb import redis_url
from tests.waiting import wait_until

pytestmark = pytest.mark.skipif(
    not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"),
    reason="the probes are proved on PostgreSQL",
)


def readyz(url: str, **headers: str) -> httpx.Response:
    return httpx.get(f"{url}/readyz", headers=headers, timeout=10)


def not_ready_on(url: str, check: str) -> dict[str, Any] | None:
    """The 503's checks once `check` is the one failing, else None (ask again)."""
    response = readyz(url)
    if response.status_code != 503:
        return None
    body = response.json()
    assert body["status"] == "not ready"
    return body["checks"] if body["checks"].get(check, "ok").split()[0] != "ok" else None


def test_a_healthy_stack_is_alive_and_ready_whatever_host_the_balancer_sends(
    toolops_server: Any, shop: Shop
) -> None:
    if not redis_url():
        pytest.skip("needs TOOLOPS_TEST_REDIS_URL")
    server = toolops_server(CELERY_BROKER_URL=redis_url(), REDIS_URL=redis_url())
    alive = httpx.get(f"{server.url}/healthz", timeout=10)
    assert alive.status_code == 200 and alive.json() == {"status": "ok"}
    ready = readyz(server.url)
    assert ready.status_code == 200, ready.text
    assert ready.json() == {
        "status": "ready",
        "checks": {"database": "ok", "migrations": "ok", "broker": "ok", "redis": "ok"},
    }
    assert ready.headers["content-type"] == "application/json"
    assert ready.headers["cache-control"] == "no-store"
    # A balancer's check sends the Host it is configured with, outside ALLOWED_HOSTS: the
    # probes build nothing from it (a page is still refused for it).
    assert readyz(server.url, Host="haproxy-check.internal").status_code == 200
    assert httpx.get(f"{server.url}/healthz", headers={"Host": "x.invalid"}).status_code == 200
    page = httpx.get(f"{server.url}/console/login/", headers={"Host": "x.invalid"})
    assert page.status_code == 400
    assert httpx.head(f"{server.url}/readyz").status_code == 200
    refused = httpx.post(f"{server.url}/readyz")
    assert refused.status_code == 405 and refused.headers["allow"] == "GET, HEAD"


def test_the_embedded_broker_is_ready_without_a_server_and_redis_unset(
    toolops_server: Any, shop: Shop
) -> None:
    server = toolops_server(CELERY_BROKER_URL="", REDIS_URL="")
    ready = readyz(server.url)
    assert ready.status_code == 200, ready.text
    assert ready.json()["checks"]["broker"] == "ok (embedded)"
    assert ready.json()["checks"]["redis"] == "not set"


@pytest.fixture
def pg_proxy() -> Iterator[FaultProxy]:
    db = settings.DATABASES["default"]
    host = db.get("HOST") or ""
    upstream = (
        host if host and not host.startswith("/") else "127.0.0.1",
        int(db.get("PORT") or 5432),
    )
    with FaultProxy(upstream=upstream) as proxy:
        yield proxy


def test_readyz_names_the_database_when_it_does_not_answer_and_heals(
    toolops_server: Any, pg_proxy: FaultProxy, shop: Shop
) -> None:
    db = connection.settings_dict
    user = f"{db['USER']}@" if db.get("USER") else ""
    server = toolops_server(DATABASE_URL=f"postgres://{user}127.0.0.1:{pg_proxy.port}/{db['NAME']}")
    assert readyz(server.url).status_code == 200
    pg_proxy.blackhole()
    checks = wait_until(
        lambda: not_ready_on(server.url, "database"),
        30,
        every=0.5,
        failure="/readyz never named the database",
    )
    assert checks["database"] in ("no answer within 2 s", "unreachable (OperationalError)")
    assert "postgres" not in str(checks)  # no URL, no user
    # Alive all the while: /healthz needs no database.
    assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200
    pg_proxy.heal()
    wait_until(
        lambda: readyz(server.url).status_code == 200,
        30,
        every=0.5,
        failure="/readyz did not recover with the database",
    )


@needs_redis_server
@pytest.mark.parametrize(
    ("down", "setting", "other", "other_says"),
    [
        ("broker", "CELERY_BROKER_URL", "redis", "not set"),
        ("redis", "REDIS_URL", "broker", "ok (embedded)"),
    ],
)
def test_readyz_names_the_redis_that_is_down_and_recovers_with_it(
    toolops_server: Any, shop: Shop, down: str, setting: str, other: str, other_says: str
) -> None:
    redis = RedisServer()
    redis.start()
    try:
        # The one Redis under test; the other part unset (REDIS_URL) or embedded (broker).
        server = toolops_server(**{"CELERY_BROKER_URL": "", "REDIS_URL": "", setting: redis.url()})
        assert readyz(server.url).status_code == 200
        redis.kill()
        checks = wait_until(
            lambda: not_ready_on(server.url, down),
            30,
            every=0.5,
            failure=f"/readyz never named the {down}",
        )
        assert checks[down] == "unreachable (ConnectionError)"
        assert checks["database"] == "ok" and checks[other] == other_says
        redis.start()  # the same port, empty
        wait_until(
            lambda: readyz(server.url).status_code == 200,
            30,
            every=0.5,
            failure=f"/readyz did not recover with the {down}",
        )
    finally:
        redis.kill()


def test_readyz_names_an_unapplied_migration_until_it_is_applied(
    toolops_server: Any, shop: Shop
) -> None:
    # The test database is fully migrated: forget that one migration was applied (the
    # table is not flushed between tests, so it is put back below).
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM django_migrations WHERE app = 'traces' AND name = "
            "(SELECT max(name) FROM django_migrations WHERE app = 'traces') RETURNING name"
        )
        [(name,)] = cursor.fetchall()
    try:
        server = toolops_server()
        response = readyz(server.url)
        assert response.status_code == 503, response.text
        checks = response.json()["checks"]
        assert checks["migrations"] == f"1 unapplied: traces.{name}"
        assert checks["database"] == "ok"
    finally:
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO django_migrations (app, name, applied) VALUES ('traces', %s, now())",
                [name],
            )
    assert readyz(server.url).status_code == 200
