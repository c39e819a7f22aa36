"""deploy/prometheus/: the alert rules pass `promtool check rules` and their own unit
tests (`promtool test rules`, which feed synthetic series and expect each alert to fire
on its case and stay quiet on its look-alikes), and are shown to fail in a broken copy;
the example configuration loads them; every alert says how bad it is, what happened and
which console page works the case; the thresholds are the product's own."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.promql import (
    PROMETHEUS,
    RULE_TESTS,
    RULES,
    alerts,
    console_page,
    metric_names,
    promtool,
    rules,
)
from traces.console.thresholds import AMPLIFICATION_MAX


def run(*args: str, cwd: Path = PROMETHEUS) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_rules_pass_promtool_check() -> None:
    result = run("check", "rules", RULES.name)

    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules())} rules found" in result.stdout


def test_the_rules_pass_their_unit_tests() -> None:
    result = run("test", "rules", RULE_TESTS.name)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_is_tested_firing_and_quiet() -> None:
    cases: dict[str, list[bool]] = {}
    for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for case in test.get("alert_rule_test", []):
            cases.setdefault(case["alertname"], []).append(bool(case.get("exp_alerts")))

    for alert in alerts():
        name = alert["alert"]
        assert True in cases.get(name, []), f"{name} is never seen to fire"
        assert False in cases.get(name, []), f"{name} is never seen to stay quiet"


def broken_copy(tmp_path: Path, old: str, new: str) -> Path:
    for path in (RULES, RULE_TESTS):
        shutil.copy(path, tmp_path / path.name)
    copied = tmp_path / RULES.name
    text = copied.read_text()
    assert text.count(old) == 1, old
    copied.write_text(text.replace(old, new))
    return tmp_path


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # A threshold moved: the unstable tool of the tests no longer alerts.
        (
            "toolops:tool_retry_amplification:15m > 1.5",
            "toolops:tool_retry_amplification:15m > 3.5",
        ),
        # The "not closed for 5 minutes" guard dropped: a breaker that tripped once pages.
        (
            "max by (tool) (min_over_time(toolops_breaker_state[5m])) >= 1",
            "max by (tool) (min_over_time(toolops_breaker_state[5m])) >= 0",
        ),
        # The fallback for a tool that never succeeded dropped: it has no "succeeded"
        # series, so its ratio has no data and it never alerts.
        ("            or\n              toolops:tool_calls:increase15m * 0\n", ""),
    ],
)
def test_the_unit_tests_catch_a_broken_rule(tmp_path: Path, old: str, new: str) -> None:
    folder = broken_copy(tmp_path, old, new)
    assert run("check", "rules", RULES.name, cwd=folder).returncode == 0

    result = run("test", "rules", RULE_TESTS.name, cwd=folder)

    assert result.returncode != 0
    assert "FAILED" in result.stdout + result.stderr


def test_the_example_configuration_loads_the_rules(tmp_path: Path) -> None:
    for name in ("prometheus.yml", RULES.name):
        shutil.copy(PROMETHEUS / name, tmp_path / name)
    # The scrape's bearer token, read from a file beside the configuration.
    (tmp_path / "toolops-token").write_text("a-token\n")

    result = run("check", "config", "prometheus.yml", cwd=tmp_path)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 rule files found" in result.stdout


def test_the_example_scrapes_the_job_the_rules_watch() -> None:
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}

    assert set(jobs) == {"toolops"}
    assert jobs["toolops"]["metrics_path"] == "/metrics"
    assert config["rule_files"] == [RULES.name]
    [down] = [a for a in alerts() if a["alert"] == "ToolOpsMetricsDown"]
    assert 'up{job="toolops"}' in down["expr"]


@pytest.mark.parametrize("alert", alerts(), ids=lambda a: a["alert"])
def test_each_alert_says_how_bad_what_and_where(alert: dict[str, Any]) -> None:
    assert alert["labels"]["severity"] in {"page", "ticket"}
    assert alert.get("for"), "an alert must hold for a while before it fires"
    annotations = alert["annotations"]
    assert set(annotations) == {"summary", "description", "runbook_url"}
    assert all(annotations[key].strip() for key in annotations)
    assert console_page(annotations["runbook_url"]), annotations["runbook_url"]


def test_a_runbook_url_that_leads_nowhere_is_caught() -> None:
    assert console_page("/console/tickets/")
    assert not console_page("/console/dead-letters/")
    assert not console_page("/api/v1/runs")


def test_the_amplification_threshold_is_the_metrics_pages() -> None:
    [alert] = [a for a in alerts() if a["alert"] == "ToolOpsRetryAmplificationHigh"]

    assert f"toolops:tool_retry_amplification:15m > {AMPLIFICATION_MAX}" in alert["expr"]


# What the console's home shows operators, and what to alert on besides (the brief of
# these rules): each signal read by at least one alert.
SIGNALS = {
    "toolops_breaker_state",
    "toolops_dead_letters_open",
    "toolops_dead_letters_oldest_age_seconds",
    "toolops_approvals_oldest_age_seconds",
    "toolops_approvals_expiring",
    "toolops_unknown_calls_oldest_age_seconds",
    "toolops_notifications_failed",
    "toolops:tool_retry_amplification:15m",
    "toolops:tool_success_ratio:15m",
    "toolops:tool_call_duration_seconds:p99_15m",
}


def test_every_signal_has_an_alert() -> None:
    read = set().union(*(metric_names(alert["expr"]) for alert in alerts()))

    assert not SIGNALS - read, f"no alert reads {sorted(SIGNALS - read)}"
