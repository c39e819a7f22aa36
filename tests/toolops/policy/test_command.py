"""`manage.py policy` (API.md "Agent policy"): apply, show, history, rollback and simulate.
A file that does not validate is refused naming its table, entry and field, and nothing
is written: the version in force stays, and no audit entry is made."""

from __future__ import annotations

import hashlib
import textwrap
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.toolops.api.helpers import create_run, post_call
from toolops.audit.models import AuditEntry
from toolops.models import Approval, ToolCall
from toolops.policy import versions
from toolops.policy.models import PolicyVersion, SpendCounter

pytestmark = pytest.mark.django_db

GOOD = """
default = "allow"

[[rule]]
name = "charges over 100"
agents = ["*"]
tools = ["charge"]
when = 'context.args.amount.greaterThan(decimal("100.00"))'
action = "approve"
"""

RULE = """
[[rule]]
name = "r"
agents = ["*"]
tools = ["charge"]
when = 'true'
action = "approve"
"""

LIMIT = """
[[limit]]
name = "l"
agents = ["*"]
tools = ["charge"]
sum = "amount"
max = "500.00"
per = "day"
"""


def write(tmp_path: Path, text: str, name: str = "policy.toml") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def run(*args: str) -> str:
    out = StringIO()
    call_command("policy", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def applied(shop: Shop, agent_a: Any, tmp_path: Path) -> PolicyVersion:
    run("apply", write(tmp_path, GOOD, "good.toml"), "--note", "first")
    return PolicyVersion.objects.get()


def test_it_applies_a_file_and_says_which_version(shop: Shop, agent_a: Any, tmp_path: Path) -> None:
    path = write(tmp_path, GOOD, "shop-policy.toml")
    out = run("apply", path)

    version = versions.active_version()
    assert version is not None and version.number == 1
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    assert out.strip() == f"Applied policy v1 (sha256 {digest})."
    assert version.text == Path(path).read_text() and version.digest == digest
    assert version.note == "applied from shop-policy.toml"
    assert version.created_by_name  # the OS user, or "command"
    entry = AuditEntry.objects.get(action=AuditEntry.Action.POLICY_APPLY)
    assert "applied from shop-policy.toml" in entry.summary
    assert "charges over 100" in entry.detail["diff"]


def test_the_note_is_the_one_given(shop: Shop, agent_a: Any, tmp_path: Path) -> None:
    run("apply", write(tmp_path, GOOD), "--note", "charges need a reviewer over 100")
    assert versions.active_version().note == "charges need a reviewer over 100"  # type: ignore[union-attr]


BAD = [
    ("bad TOML", 'default = "allow\n', "the document: not valid TOML"),
    (
        "unknown top-level key",
        'default = "allow"\n[[rules]]\nname = "x"\n',
        "the document, field 'rules': unknown field",
    ),
    (
        "unknown field in a rule",
        RULE + 'condition = "x"\n',
        "rule 'r', field 'condition': unknown field",
    ),
    (
        "unknown agent",
        '[[grant]]\nagents = ["agent-z"]\ntools = ["charge"]\n',
        "grant 1, field 'agents': no agent is named 'agent-z'",
    ),
    (
        "unknown tool",
        RULE.replace('["charge"]', '["chrage"]'),
        "rule 'r', field 'tools': no tool is named 'chrage'",
    ),
    (
        "internal tool",
        RULE.replace('["charge"]', '["refund"]'),
        "rule 'r', field 'tools': no tool is named 'refund'",
    ),
    ("bad action", RULE.replace('"approve"', '"deny"'), "rule 'r', field 'action': one of approve"),
    (
        "bad mode",
        RULE + 'mode = "dry_run"\n',
        "rule 'r', field 'mode': one of enforce, log_only, not 'dry_run'",
    ),
    (
        "bad per",
        LIMIT.replace('"day"', '"hour"'),
        "limit 'l', field 'per': one of day, week, month, total",
    ),
    (
        "bad time zone",
        LIMIT + 'time_zone = "Mars/Olympus"\n',
        "limit 'l', field 'time_zone': no time zone is named 'Mars/Olympus'",
    ),
    (
        "max not a decimal string for a sum",
        LIMIT.replace('"500.00"', "500"),
        "limit 'l', field 'max': a decimal string",
    ),
    (
        "max not a decimal number",
        LIMIT.replace('"500.00"', '"lots"'),
        "limit 'l', field 'max': 'lots' is not a decimal number",
    ),
    (
        "max not an integer for a count",
        LIMIT.replace('sum = "amount"\n', ""),
        "limit 'l', field 'max': a whole number of calls",
    ),
    ("duplicate rule names", RULE + RULE, "rule 'r', field 'name': two rules are named 'r'"),
    (
        "a condition that does not parse",
        RULE.replace("'true'", "'context.args.amount >'"),
        "rule 'r', field 'when':",
    ),
    (
        "a condition of the wrong type",
        RULE.replace("'true'", "'context.args.amount > 100'"),
        "rule 'r', field 'when':",
    ),
    (
        "a field the tool does not have",
        RULE.replace("'true'", "'context.args.colour == \"red\"'"),
        "rule 'r', field 'when':",
    ),
    (
        "a limit summing a field the tool lacks",
        LIMIT.replace('"amount"', '"price"'),
        "limit 'l', field 'sum': tool 'charge' has no decimal or number args field 'price'",
    ),
]


@pytest.mark.parametrize(("text", "expected"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_file_that_does_not_validate_is_refused_and_nothing_is_written(
    applied: PolicyVersion, tmp_path: Path, text: str, expected: str
) -> None:
    audits = AuditEntry.objects.count()
    with pytest.raises(CommandError) as refused:
        run("apply", write(tmp_path, text, "bad.toml"), "--note", "broken")

    assert str(refused.value).startswith(expected), str(refused.value)
    assert refused.value.returncode == 1  # the shell's exit status
    assert versions.active_version() == applied
    assert PolicyVersion.objects.count() == 1
    assert AuditEntry.objects.count() == audits


def test_cedar_names_what_is_wrong_in_a_condition(applied: PolicyVersion, tmp_path: Path) -> None:
    text = RULE.replace("'true'", "'context.args.colour == \"red\"'")
    with pytest.raises(CommandError, match="colour"):
        run("apply", write(tmp_path, text))
    text = RULE.replace("'true'", "'context.args.amount > 100'")
    with pytest.raises(CommandError, match="decimal|Long"):
        run("apply", write(tmp_path, text))


def test_a_missing_file_is_named(applied: PolicyVersion, tmp_path: Path) -> None:
    missing = str(tmp_path / "nowhere.toml")
    with pytest.raises(CommandError, match=r"No policy file at .*nowhere\.toml"):
        run("apply", missing)
    with pytest.raises(CommandError, match="nowhere.toml"):
        run("simulate", missing)
    assert PolicyVersion.objects.count() == 1


def test_a_file_that_is_not_text_is_refused(applied: PolicyVersion, tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_bytes(b'default = "\xff"\n')
    with pytest.raises(CommandError, match="not UTF-8"):
        run("apply", str(path))
    assert PolicyVersion.objects.count() == 1


def test_an_empty_file_is_refused(applied: PolicyVersion, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="the document: empty"):
        run("apply", write(tmp_path, "\n"))
    assert PolicyVersion.objects.count() == 1


def test_show_prints_the_version_in_force_and_its_text(
    applied: PolicyVersion, tmp_path: Path
) -> None:
    out = run("show")
    first, note = out.splitlines()[:2]
    assert first.startswith("Policy v1, in force since ")
    assert first.endswith(f"by {applied.created_by_name}")
    assert note == "Note: first"
    assert 'name = "charges over 100"' in out


def test_show_and_history_without_a_policy(db: None) -> None:
    expected = "No policy: every agent may call every public tool; approvals follow the catalog."
    assert run("show").strip() == expected
    assert run("history").strip() == expected


def test_history_lists_every_version_newest_first(applied: PolicyVersion, tmp_path: Path) -> None:
    run("apply", write(tmp_path, 'default = "allow"\n'), "--note", "no rules")
    run("rollback", "1")

    lines = run("history").splitlines()
    assert [line[2:].split()[0] for line in lines[:3]] == ["v3", "v2", "v1"]
    assert lines[0].startswith("* v3") and lines[1].startswith("  v2")
    assert "applied" in lines[0] and lines[0].endswith("rollback to v1 (restores v1)")
    assert lines[1].endswith("no rules") and lines[2].endswith("first")
    assert lines[-1] == "(* in force)"


def test_rollback_makes_a_new_version_equal_to_n(applied: PolicyVersion, tmp_path: Path) -> None:
    run("apply", write(tmp_path, 'default = "allow"\n'), "--note", "no rules")
    out = run("rollback", "1", "--note", "the rule was right")

    version = versions.active_version()
    assert version is not None
    assert (version.number, version.restores, version.text) == (3, 1, applied.text)
    assert version.note == "the rule was right"
    assert out.strip() == f"Rolled back: policy v3 restores v1 (sha256 {applied.digest})."
    entry = AuditEntry.objects.get(action=AuditEntry.Action.POLICY_ROLLBACK)
    assert "rolled back to policy v3 (v1)" in entry.summary


def test_rollback_to_a_version_that_does_not_exist(applied: PolicyVersion) -> None:
    with pytest.raises(CommandError, match="the rollback, field 'version': there is no version 9"):
        run("rollback", "9")
    assert PolicyVersion.objects.count() == 1


def make_calls(api: APIClient) -> list[dict[str, Any]]:
    create_run(api, "r-1")
    sent = [
        ("query_stock", {"sku": "A12"}),
        ("charge", {"order_id": "o-1", "amount": "500.00"}),
        ("charge", {"order_id": "o-2", "amount": "50.00"}),
    ]
    answers = []
    for step, (tool, args) in enumerate(sent):
        response = post_call(api, "r-1", step_index=step, tool=tool, args=args)
        assert response.status_code in (200, 202), response.content
        answers.append(response.json())
    return answers


def test_simulate_reports_what_a_draft_would_have_done_and_writes_nothing(
    api: APIClient, shop: Shop, tmp_path: Path
) -> None:
    calls = make_calls(api)
    draft = write(
        tmp_path,
        """
        default = "deny"
        [[grant]]
        agents = ["agent-a"]
        tools = ["charge"]
        [[rule]]
        name = "charges over 100"
        agents = ["*"]
        tools = ["charge"]
        when = 'context.args.amount.greaterThan(decimal("100.00"))'
        action = "refuse"
        """,
        "draft.toml",
    )
    tables = (ToolCall, PolicyVersion, SpendCounter, Approval, AuditEntry)
    before = [model.objects.count() for model in tables]

    out = run("simulate", draft, "--days", "3")

    assert [model.objects.count() for model in tables] == before
    lines = out.splitlines()
    assert lines[0] == "Simulated draft.toml on the calls of the last 3 days."
    assert "no grant: refused, 1 call" in lines
    assert "rule 'charges over 100': refused, 1 call" in lines
    big = lines[lines.index("rule 'charges over 100': refused, 1 call") + 1].split()
    assert big[:3] == [calls[1]["call_id"], "charge", "agent-a"]
    read = lines[lines.index("no grant: refused, 1 call") + 1].split()
    assert read[:3] == [calls[0]["call_id"], "query_stock", "agent-a"]
    assert lines[-1] == "Totals: 3 calls examined; 2 findings covering 2 calls."


def test_simulate_shows_at_most_five_examples(api: APIClient, shop: Shop, tmp_path: Path) -> None:
    create_run(api, "r-1")
    for step in range(7):
        post_call(api, "r-1", step_index=step, tool="query_stock", args={"sku": "A12"})
    draft = write(tmp_path, 'default = "deny"\n')

    lines = run("simulate", draft).splitlines()
    at = lines.index("no grant: refused, 7 calls")
    assert len([line for line in lines[at + 1 :] if line.startswith("    ")]) == 5


def test_simulate_with_nothing_to_report(api: APIClient, shop: Shop, tmp_path: Path) -> None:
    out = run("simulate", write(tmp_path, GOOD))
    assert "No grant, rule or limit of it would have changed any of these calls." in out
    assert out.splitlines()[-1] == "Totals: 0 calls examined; 0 findings covering 0 calls."


@pytest.mark.parametrize("days", ["0", "91", "-1"])
def test_simulate_days_must_be_1_to_90(applied: PolicyVersion, tmp_path: Path, days: str) -> None:
    with pytest.raises(CommandError, match=f"--days must be from 1 to 90, not {days}"):
        run("simulate", write(tmp_path, GOOD), "--days", days)


def test_simulate_refuses_a_draft_that_does_not_validate(
    applied: PolicyVersion, tmp_path: Path
) -> None:
    with pytest.raises(CommandError, match="rule 'r', field 'action'"):
        run("simulate", write(tmp_path, RULE.replace('"approve"', '"deny"')))
