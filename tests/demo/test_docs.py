"""docs/demo.md tells what the scripted agent does: its numbered scenario list is the
agent's SCENARIOS, in order, and every count it gives is theirs."""

from __future__ import annotations

import re
from pathlib import Path

from toolops.demo import agent, approvals

DOC = Path(__file__).resolve().parents[2] / "docs" / "demo.md"
LIST_HEADING = "## The scripted agent, scenario by scenario"


def listed_scenarios(text: str) -> list[tuple[int, str]]:
    """The doc's numbered list, `N. **name** — …`, in its scenario section."""
    section = text.split(LIST_HEADING, 1)[1].split("\n## ", 1)[0]
    return [(int(n), name) for n, name in re.findall(r"^(\d+)\. \*\*(.+?)\*\*", section, re.M)]


def test_the_doc_lists_every_scenario_the_agent_runs_in_its_order() -> None:
    names = [name for name, _ in agent.SCENARIOS]

    listed = listed_scenarios(DOC.read_text())

    assert [name for _, name in listed] == names
    assert [n for n, _ in listed] == list(range(1, len(names) + 1))


def test_the_doc_counts_them_as_the_agent_does() -> None:
    text = " ".join(DOC.read_text().split())  # counts may straddle a line break
    total = len(agent.SCENARIOS)
    for_a_person = [name for name, run in agent.SCENARIOS if run.__module__ == approvals.__name__]

    counts = [int(n) for n in re.findall(r"\b(\d+) scenarios\b", text)]
    assert counts and set(counts) == {total}, counts
    assert f"All {total} scenarios take" in text
    assert f"{len(for_a_person)} of them leave a call waiting for a person" in text
    assert f"The {len(for_a_person)} approval scenarios' runs" in text
    # No count spelt out in words, to go stale unseen.
    assert not re.search(r"\b(nineteen|twenty|eighteen)\b", text, re.I)
