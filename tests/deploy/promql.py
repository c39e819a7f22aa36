"""What the alert rules and the Grafana dashboard under deploy/ read: their PromQL
expressions, and the metric and label names in them, to hold against a real scrape of
`/metrics` (tests/deploy/test_alert_metrics.py). A regular expression, not a PromQL
parser: the expressions are ours, and promtool checks that they parse."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from django.urls import Resolver404, resolve

from toolops.probes.asgi import Probes

ROOT = Path(__file__).resolve().parent.parent.parent
PROMETHEUS = ROOT / "deploy" / "prometheus"
RULES = PROMETHEUS / "toolops-rules.yml"
RULE_TESTS = PROMETHEUS / "toolops-rules.test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "toolops-dashboard.json"

# Labels Prometheus adds to every scraped series: no /metrics sample has them.
TARGET_LABELS = frozenset({"job", "instance"})
# Series Prometheus makes itself: `up` is 0 when a scrape fails.
PROMETHEUS_OWN = frozenset({"up"})

# `name{…}` and `name[…]`: a selector, its name and its matchers.
SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{([^}]*)\}|\[)")
# Any of ours, even bare: `max(toolops_dead_letters_open)`.
OURS = re.compile(r"\btoolops[_:][a-zA-Z0-9_:]*")
MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"')
GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")


def promtool() -> str:
    """promtool's path. Missing: a skip on a developer's machine, a failure in CI, where
    .ci/services installs it."""
    found = shutil.which("promtool")
    if found:
        return found
    reason = "promtool is not installed (Debian's `prometheus` package provides it)"
    if os.environ.get("CI"):
        pytest.fail(f"{reason}: .ci/services should have installed it")
    pytest.skip(reason)


def console_page(url: str) -> bool:
    """`url` (a path, a query maybe) is a console page, or a probe answered before Django."""
    path = urlsplit(url).path
    if path in Probes.PATHS:
        return True
    try:
        return resolve(path).namespace == "console"
    except Resolver404:
        return False


def rules(path: Path = RULES) -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(path.read_text())["groups"] for rule in group["rules"]]


def alerts(path: Path = RULES) -> list[dict[str, Any]]:
    return [rule for rule in rules(path) if "alert" in rule]


def recorded(path: Path = RULES) -> set[str]:
    return {rule["record"] for rule in rules(path) if "record" in rule}


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, those inside collapsed rows too."""
    for panel in board.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def dashboard_exprs(board: dict[str, Any]) -> list[str]:
    """Each target's expression, and each query variable's."""
    exprs = [t["expr"] for p in panels(board) for t in p.get("targets", []) if "expr" in t]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            exprs.append(query["query"] if isinstance(query, dict) else query)
    return exprs


def metric_names(expr: str) -> set[str]:
    return {m.group(1) for m in SELECTOR.finditer(expr)} | set(OURS.findall(expr))


def matchers(expr: str) -> list[tuple[str, str, str, str]]:
    """(metric, label, operator, value) of every label matcher in a selector."""
    return [
        (selector.group(1), *matcher.groups())
        for selector in SELECTOR.finditer(expr)
        for matcher in MATCHER.finditer(selector.group(3) or "")
    ]


def grouping_labels(expr: str) -> set[str]:
    """The labels of every `by (…)`, `on (…)`, `without (…)` and `ignoring (…)`."""
    return {
        label.strip()
        for group in GROUPING.findall(expr)
        for label in group.split(",")
        if label.strip()
    }


Scraped = dict[str, dict[str, set[str]]]


def problems(expr: str, scraped: Scraped, records: set[str]) -> list[str]:
    """What in `expr` a scrape does not have: `scraped` maps each sample name to its
    labels and the values seen for each; `records` are the rules' own series."""
    found = []
    for name in sorted(metric_names(expr)):
        known = name in scraped or name in records or name in PROMETHEUS_OWN
        if not known:
            found.append(f"{name} is not in /metrics")
    for name, label, op, value in matchers(expr):
        labels = scraped.get(name)
        if labels is None or label in TARGET_LABELS:
            continue
        if label not in labels:
            found.append(f"{name} has no label {label!r}")
        elif op == "=" and value not in labels[label]:
            found.append(f"{name} never has {label}={value!r}")
    every_label = {label for labels in scraped.values() for label in labels}
    for label in sorted(grouping_labels(expr) - every_label - TARGET_LABELS):
        found.append(f"no /metrics sample has the label {label!r}")
    return found
