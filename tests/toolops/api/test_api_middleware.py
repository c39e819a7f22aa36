"""The API's own middleware chain still guards the host and HTTPS (real server)."""

from __future__ import annotations

from typing import Any

import httpx


def test_it_refuses_a_host_not_allowed(toolops_server: Any, agent_a: Any) -> None:
    server = toolops_server()
    headers = {"Authorization": f"Bearer {agent_a[1]}", "Host": "evil.example"}
    response = httpx.get(f"{server.url}/api/v1/tools", headers=headers)
    assert response.status_code == 400


def test_it_redirects_to_https_and_sends_nosniff(toolops_server: Any, agent_a: Any) -> None:
    plain = toolops_server()
    headers = {"Authorization": f"Bearer {agent_a[1]}"}
    ok = httpx.get(f"{plain.url}/api/v1/tools", headers=headers)
    assert ok.status_code == 200
    assert ok.headers["x-content-type-options"] == "nosniff"
    assert "set-cookie" not in ok.headers  # no session machinery on the API

    secure = toolops_server(TOOLOPS_HTTPS="1")
    redirected = httpx.get(f"{secure.url}/api/v1/tools", headers=headers)
    assert redirected.status_code == 301
    assert redirected.headers["location"].startswith("https://")
