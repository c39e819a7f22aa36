"""The demo's daily-limit scenario (toolops/demo/spend.py) against a real ToolOps server
with the demo's policy in force: demo-cashier charges with no reviewer until its
500.00 EUR a day would be passed, and the charge that would pass it fails `spend_limit`
with nothing sent and the feedback the model needs."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest

from toolops.demo import agent
from toolops.demo.logins import CASHIER_NAME
from toolops.demo.policy import demo_policy_apply
from toolops.models import Agent, Approval, Run, ToolCall
from toolops.policy.models import SpendCounter
from toolops.services import agent_create

FEEDBACK = (
    "Daily limit 'charges per day' of 500.00 EUR for charge reached (434.00 spent); it "
    "resets at 00:00 UTC. Ask the user or stop."
)


def run_daily_limit(url: str, token: str, cashier_token: str, shop_url: str) -> tuple[int, str]:
    out = io.StringIO()
    argv = ["--url", url, "--token", token, "--cashier-token", cashier_token]
    code = agent.main([*argv, "--shop", shop_url, "--only", "daily limit"], out=out)
    return code, out.getvalue()


def line_of(output: str) -> str:
    [line] = [x for x in output.splitlines() if x.startswith(("✓ daily limit", "✗ daily limit"))]
    return line


def test_the_cashier_charges_until_its_daily_limit_refuses(
    toolops_server: Any, shop: Any, agent_a: tuple[Agent, str], settings: Any
) -> None:
    cashier, cashier_token = agent_create(name=CASHIER_NAME)
    demo_policy_apply(catalog=settings.TOOLOPS_TOOLS_FILE)
    server = toolops_server()

    code, output = run_daily_limit(server.url, agent_a[1], cashier_token, shop.url)

    assert code == 0, output
    line = line_of(output)
    assert line.startswith("✓ daily limit: run demo-"), line
    assert "demo-cashier charged 80.00, 95.00, 100.00, 60.00, 99.00 EUR with no reviewer" in line
    assert "the next charge, 99.00, failed spend_limit and nothing was sent" in line, line
    assert f"“{FEEDBACK}”" in line, line
    [run_id] = re.findall(r"run (demo-\S+?):", line)
    run = Run.objects.get(run_id=run_id)
    assert (run.agent, run.status) == (cashier, "completed")
    calls = list(run.calls.order_by("step_index"))
    assert [c.status for c in calls] == ["succeeded"] * 5 + ["failed"]
    over = calls[-1]
    assert (over.error_class, over.error_reason) == ("fatal", "spend_limit")
    assert over.feedback == FEEDBACK
    assert ["charges per day", "refuse"] in over.policy_rules
    assert over.attempts == 0
    # Nothing waited for a reviewer, and exactly the five charges reached the shop.
    assert not Approval.objects.exists()
    charged = [c for c in shop.state()["charges"] if c["order_id"].startswith("ord_counter_")]
    assert sorted(c["amount"] for c in charged) == sorted(
        ["80.00", "95.00", "100.00", "60.00", "99.00"]
    )
    [counter] = SpendCounter.objects.filter(agent=cashier, limit="charges per day")
    assert (counter.currency, counter.spent) == ("EUR", 4_340_000)

    # The same day again: the first charge meets the limit at once, nothing is sent.
    code, output = run_daily_limit(server.url, agent_a[1], cashier_token, shop.url)

    assert code == 0, output
    again = line_of(output)
    assert "demo-cashier's first charge of 80.00 EUR failed spend_limit at once" in again, again
    assert "(434.00 spent)" in again, again
    counter.refresh_from_db()
    assert counter.spent == 4_340_000
    charged = [c for c in shop.state()["charges"] if c["order_id"].startswith("ord_counter_")]
    assert len(charged) == 5
    assert ToolCall.objects.filter(run__agent=cashier, status="failed").count() == 2


def test_without_the_cashier_token_the_scenario_says_how_to_give_it(
    shop: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TOOLOPS_CASHIER_TOKEN", raising=False)
    out = io.StringIO()
    argv = ["--url", "http://127.0.0.1:9", "--token", "tok_unused", "--shop", shop.url]
    logins = ["--logins", str(tmp_path / "none.txt")]

    code = agent.main([*argv, *logins, "--only", "daily_limit"], out=out)

    assert code == 1, out.getvalue()
    line = line_of(out.getvalue())
    assert line.startswith("✗ daily limit: no token for demo-cashier"), line
    assert "--cashier-token" in line and "agent:demo-cashier" in line, line
