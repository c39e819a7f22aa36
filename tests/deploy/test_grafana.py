"""deploy/grafana/toolops-dashboard.json: valid JSON that Grafana imports as it is, every
query on the data source the importer picks (the `datasource` variable, never a fixed
uid), every expression one Prometheus parses (promtool, on the expressions written out
as recording rules), the panels on the grid. Its metric names are held against a real
scrape in test_alert_metrics.py."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.promql import (
    DASHBOARD,
    console_page,
    dashboard,
    dashboard_exprs,
    panels,
    promtool,
)

VARIABLE = "${datasource}"
# Grafana's own variables, as Prometheus would get them once Grafana put them in.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "1m", "$__range": "6h"}


def data_sources(node: Any) -> Iterator[Any]:
    """Every `datasource` value anywhere in the dashboard."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "datasource":
                yield value
            yield from data_sources(value)
    elif isinstance(node, list):
        for item in node:
            yield from data_sources(item)


def fixed_data_sources(board: dict[str, Any]) -> list[Any]:
    """The data sources that are not the variable: each would name one Grafana's uid."""
    return [
        ds
        for ds in data_sources(board)
        if ds != VARIABLE and ds != {"type": "prometheus", "uid": VARIABLE}
    ]


def test_it_is_valid_json_with_a_data_source_variable() -> None:
    board = json.loads(DASHBOARD.read_text())

    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert board["uid"] and board["title"]
    # Imported as it is: nothing for the importer to fill in but the variable.
    assert "__inputs" not in board
    assert board.get("id") is None


def test_every_query_uses_the_data_source_variable() -> None:
    board = dashboard()

    assert fixed_data_sources(board) == []
    for panel in panels(board):
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": VARIABLE}, panel["title"]
        assert panel["targets"], f"{panel['title']} has no query"
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == VARIABLE, panel["title"]


def test_a_fixed_data_source_is_caught() -> None:
    board = dashboard()
    [panel, *_] = [p for p in panels(board) if p["type"] != "row"]
    panel["targets"][0]["datasource"] = {"type": "prometheus", "uid": "P1809F7CD0C75ACF3"}

    assert fixed_data_sources(board) == [{"type": "prometheus", "uid": "P1809F7CD0C75ACF3"}]


def as_prometheus_gets_it(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    expr = expr.replace("$tool", ".*")
    assert "$" not in expr, f"a variable the dashboard does not define: {expr}"
    return expr


def test_every_expression_parses(tmp_path: Path) -> None:
    board = dashboard()
    exprs = [as_prometheus_gets_it(e) for e in dashboard_exprs(board)]
    # label_values(…) is Grafana's, not PromQL: its metric is checked against the scrape.
    exprs = [e for e in exprs if not e.startswith("label_values(")]
    rules = [{"record": f"dashboard:panel_{n}", "expr": e} for n, e in enumerate(exprs)]
    written = tmp_path / "dashboard-rules.yml"
    written.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))

    result = subprocess.run(
        [promtool(), "check", "rules", str(written)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules)} rules found" in result.stdout


def test_the_panels_fit_the_grid_without_overlapping() -> None:
    taken: set[tuple[int, int]] = set()
    ids = []
    for panel in panels(dashboard()):
        ids.append(panel["id"])
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        cells = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & taken, f"{panel['title']} overlaps another panel"
        taken |= cells
    assert len(ids) == len(set(ids))


def test_its_links_open_console_pages_on_the_site_given() -> None:
    links = [link["url"] for p in panels(dashboard()) for link in p.get("links", [])]

    assert links
    for url in links:
        assert url.startswith("${console}/console/"), url
        assert console_page(url.removeprefix("${console}")), url
