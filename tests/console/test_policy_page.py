"""/console/policy/ (API.md "Agent policy"): operators read the policy in force, write a
draft checked as they type, simulate it, apply it with a note, compare versions and roll
back; with two operators required an apply waits for another's Confirm. Every refused
write says why, naming the problem, and writes nothing."""

from __future__ import annotations

import html
import re
import textwrap
from typing import Any

import pytest
from django.test import Client

from tests.conftest import Shop
from tests.toolops.policy.helpers import apply_policy
from toolops.audit.models import AuditEntry
from toolops.models import Agent
from toolops.policy import versions
from toolops.policy.models import PolicyVersion

from .conftest import logged_in, make_call, make_run, make_user

pytestmark = pytest.mark.django_db

URL = "/console/policy/"
GOOD = textwrap.dedent(
    """\
    default = "deny"

    [[grant]]
    agents = ["agent-a"]
    tools = ["query_stock", "charge"]

    [[grant]]
    agents = ["*"]
    tools = ["query_stock"]

    [[rule]]
    name = "charges over 100"
    agents = ["*"]
    tools = ["charge"]
    when = 'context.args.amount.greaterThan(decimal("100.00"))'
    action = "approve"
    """
)
OPEN = 'default = "allow"\n'


@pytest.fixture
def catalog(shop: Shop, agent_a: tuple[Agent, str]) -> Agent:
    """The demo shop's catalog and agent-a, whom the policies here name."""
    return agent_a[0]


def written() -> tuple[int, int]:
    """What a refused write must leave as it was: versions and audit entries (creating
    agent-a wrote one)."""
    return PolicyVersion.objects.count(), AuditEntry.objects.count()


NOTHING = (0, 1)


def draft_of(page: str) -> str:
    """The editor's text, as the browser shows it (without the newline after the tag, which
    HTML drops)."""
    found = re.search(r'<textarea id="policy-text"[^>]*>\n(.*?)</textarea>', page, re.S)
    assert found is not None, "no editor on the page"
    return html.unescape(found.group(1))


def simulated(client: Client, text: str) -> str:
    """Simulate `text` on the page; the signed digest Apply needs."""
    page = client.post(f"{URL}simulate/", {"text": text, "days": "7"})
    assert page.status_code == 200, page.content.decode()[:2000]
    found = re.search(r'name="simulated" value="([^"]+)"', page.content.decode())
    assert found, "no simulated digest on the page"
    return found.group(1)


def apply(client: Client, text: str, note: str = "first policy", **extra: Any) -> Any:
    return client.post(
        f"{URL}apply/", {"text": text, "note": note, "simulated": simulated(client, text), **extra}
    )


def test_only_operators_may_open_or_change_it(
    reviewer_client: Client, support: Any, catalog: Agent
) -> None:
    apply_policy(OPEN)
    before = written()
    for client in (reviewer_client, logged_in(support)):
        assert client.get(URL).status_code == 403
        for action in ("validate/", "simulate/", "apply/"):
            answer = client.post(f"{URL}{action}", {"text": GOOD, "note": "n"})
            assert answer.status_code == 403
        for action in ("rollback", "confirm", "withdraw"):
            assert client.post(f"{URL}versions/1/{action}/", {"note": "n"}).status_code == 403
    assert written() == before


def test_without_a_policy_it_says_what_that_means_and_offers_a_starter(
    operator_client: Client, catalog: Agent
) -> None:
    page = operator_client.get(URL).content.decode()
    assert "No policy is in force" in page
    assert "Every agent may call every public tool, and approvals follow the catalog" in page
    assert 'href="/console/policy/"' in page  # the operator's menu
    text = draft_of(page)
    assert 'default = "allow"' in text
    # The starter is a policy as it stands: applied unchanged it changes nothing.
    assert versions.validate(text).default == "allow"


def test_it_shows_the_version_in_force_in_words(
    operator_client: Client, catalog: Agent, operator: Any
) -> None:
    apply_policy(GOOD, note="charges need a reviewer")
    page = operator_client.get(URL).content.decode()
    assert "In force:" in page and ">v1</a>" in page
    assert "charges need a reviewer" in page
    assert 'default = "deny"' in page
    grants = re.search(r'<table class="table policy-grants">(.*?)</table>', page, re.S)
    assert grants is not None
    rows = re.findall(r"<tr[^>]*>\s*<th scope=\"row\">(.*?)</th>(.*?)</tr>", grants.group(1), re.S)
    cells = {who.strip(): re.findall(r">(allowed|not allowed)<", tds) for who, tds in rows}
    tools = re.findall(r"<th><code>(\w+)</code></th>", grants.group(1))
    assert cells["agent-a"][tools.index("charge")] == "allowed"
    assert cells["every other agent"][tools.index("charge")] == "not allowed"
    assert cells["every other agent"][tools.index("query_stock")] == "allowed"
    assert "A call of charge by any agent waits for a reviewer when its condition holds" in page
    assert (
        '<code class="policy-when">context.args.amount.greaterThan(decimal(&quot;100.00&quot;))'
        in page
    )


def test_with_default_allow_it_says_so_plainly(operator_client: Client, catalog: Agent) -> None:
    apply_policy(OPEN)
    page = operator_client.get(URL).content.decode()
    assert "every agent may call every public tool</strong>, unless a rule below" in page
    assert "policy-grants" not in page


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (GOOD, "Valid: 2 grants, 1 rule, 0 limits."),
        ('default = "deny"\n[[grant]\n', "the document: not valid TOML"),
        (
            GOOD.replace('["agent-a"]', '["ghost"]'),
            "grant 1, field &#x27;agents&#x27;: no agent is named &#x27;ghost&#x27;",
        ),
        (
            GOOD.replace("amount.greaterThan", "amount_x.greaterThan"),
            "rule &#x27;charges over 100&#x27;, field &#x27;when&#x27;",
        ),
        ("", "The draft is empty"),
    ],
)
def test_it_checks_the_draft_as_it_is_typed(
    operator_client: Client, catalog: Agent, text: str, said: str
) -> None:
    answer = operator_client.post(f"{URL}validate/", {"text": text}, HTTP_HX_REQUEST="true")
    assert answer.status_code == 200
    fragment = answer.content.decode()
    assert said in fragment
    assert 'id="policy-check"' in fragment
    # Apply stays disabled: this text was never simulated.
    assert re.search(r'id="policy-apply-state"[^>]*hx-swap-oob="true"', fragment)
    assert re.search(r"<button[^>]*policy/apply/[^>]*disabled", fragment)
    assert written() == NOTHING


def test_simulate_shows_what_the_draft_would_have_done(
    operator_client: Client, catalog: Agent
) -> None:
    run = make_run(catalog, "r-sim")
    big = make_call(
        run, "tc-1", 0, "charge", "succeeded", args={"order_id": "o-1", "amount": "250.00"}
    )
    make_call(run, "tc-2", 1, "charge", "succeeded", args={"order_id": "o-2", "amount": "20.00"})
    page = operator_client.post(f"{URL}simulate/", {"text": GOOD, "days": "7"}).content.decode()
    assert "Simulated: 2 calls of the last 7 days" in page
    finding = re.search(r'<tr class="finding">(.*?)</tr>', page, re.S)
    assert finding is not None
    row = finding.group(1)
    assert "charges over 100" in row and ">held<" in row and '<td class="num">1</td>' in row
    assert f'href="/console/calls/{big.call_id}/"' in row
    # Apply is enabled for this very text, and nothing was written.
    assert not re.search(r"<button[^>]*policy/apply/[^>]*disabled", page)
    assert written() == NOTHING


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('default = "deny"\n[[grant]\n', "not valid TOML"),
        (GOOD.replace('["agent-a"]', '["ghost"]'), "no agent is named &#x27;ghost&#x27;"),
        (GOOD.replace("amount.greaterThan", "amount_x.greaterThan"), "field &#x27;when&#x27;"),
    ],
)
def test_a_draft_that_does_not_validate_is_refused_and_kept(
    operator_client: Client, catalog: Agent, text: str, said: str
) -> None:
    for action in ("simulate/", "apply/"):
        answer = operator_client.post(f"{URL}{action}", {"text": text, "note": "why"})
        assert answer.status_code == 400
        page = answer.content.decode()
        refusal = re.search(r'<div class="policy-refusals" role="alert">(.*?)</div>', page, re.S)
        assert refusal is not None and said in refusal.group(1)
        assert draft_of(page) == text  # kept, to be fixed
        assert written() == NOTHING


@pytest.mark.parametrize("days", ["0", "91", "a week"])
def test_a_simulation_of_a_bad_number_of_days_is_refused(
    operator_client: Client, catalog: Agent, days: str
) -> None:
    answer = operator_client.post(f"{URL}simulate/", {"text": GOOD, "days": days})
    assert answer.status_code == 400
    assert "days: " in answer.content.decode()
    assert 'id="simulation"' not in answer.content.decode()
    assert written() == NOTHING


def test_apply_needs_this_text_simulated_and_a_note(
    operator_client: Client, catalog: Agent
) -> None:
    never = operator_client.post(f"{URL}apply/", {"text": GOOD, "note": "why"})
    assert never.status_code == 400
    assert "Simulate this draft before Apply" in never.content.decode()

    other = simulated(operator_client, OPEN)
    changed = operator_client.post(
        f"{URL}apply/", {"text": GOOD, "note": "why", "simulated": other}
    )
    assert "The draft changed since it was simulated" in changed.content.decode()

    forged = operator_client.post(f"{URL}apply/", {"text": GOOD, "note": "why", "simulated": "x"})
    assert "its simulation could not be read" in forged.content.decode()

    no_note = apply(operator_client, GOOD, note="  ")
    assert no_note.status_code == 400
    assert "the note field is required" in no_note.content.decode()
    assert written() == NOTHING


def test_an_operator_applies_a_simulated_draft_with_a_note(
    operator_client: Client, catalog: Agent, operator: Any
) -> None:
    # As a browser sends a textarea: "\r\n" line ends, one digest all the same.
    answer = apply(operator_client, GOOD.replace("\n", "\r\n"), note="charges need a reviewer")
    assert answer.status_code == 302 and answer["Location"] == URL
    version = PolicyVersion.objects.get()
    assert (version.number, version.state, version.text) == (1, "applied", GOOD)
    assert version.created_by == operator and version.note == "charges need a reviewer"
    page = operator_client.get(URL).content.decode()
    assert "Policy v1 applied" in page
    assert re.search(r'id="version-1">.*?in force', page, re.S)

    entry = AuditEntry.objects.get(action=AuditEntry.Action.POLICY_APPLY)
    assert entry.actor == operator and entry.object_url == "/console/policy/versions/1/"
    audit = operator_client.get("/console/audit/?action=policy.apply").content.decode()
    assert 'href="/console/policy/versions/1/"' in audit
    assert "charges need a reviewer" in audit and "olga" in audit

    again = apply(operator_client, GOOD, note="again")
    assert again.status_code == 400
    assert "This draft is the text of v1, in force: nothing to apply" in again.content.decode()
    assert PolicyVersion.objects.count() == 1


def test_the_audit_filter_lists_every_policy_action(operator_client: Client) -> None:
    page = operator_client.get("/console/audit/").content.decode()
    for action in ("apply", "rollback", "propose", "confirm", "withdraw"):
        assert f'<option value="policy.{action}">' in page


def test_history_compare_and_version_pages(operator_client: Client, catalog: Agent) -> None:
    apply_policy(OPEN, note="open")
    apply_policy(GOOD, note="closed")
    page = operator_client.get(URL).content.decode()
    assert re.search(r'id="version-2">.*?in force.*?closed', page, re.S)
    # By default: the version in force against the one before it.
    assert '<span class="d-del">-default = &quot;allow&quot;</span>' in page
    assert '<span class="d-add">+default = &quot;deny&quot;</span>' in page

    back = operator_client.get(f"{URL}?old=2&new=1").content.decode()
    assert '<span class="d-add">+default = &quot;allow&quot;</span>' in back
    missing = operator_client.get(f"{URL}?old=1&new=9")
    assert missing.status_code == 400 and "There is no version v9" in missing.content.decode()
    assert "Choose two versions" in operator_client.get(f"{URL}?old=x&new=1").content.decode()

    one = operator_client.get(f"{URL}versions/1/").content.decode()
    assert "Policy v1" in one and "What it changed from no policy" in one
    assert "Roll back to v1" in one
    assert operator_client.get(f"{URL}versions/7/").status_code == 404


def test_a_rollback_is_a_new_version_with_the_old_text(
    operator_client: Client, catalog: Agent, operator: Any
) -> None:
    apply_policy(OPEN, note="open")
    apply_policy(GOOD, note="closed")
    answer = operator_client.post(f"{URL}versions/1/rollback/", {"note": ""})
    assert answer.status_code == 302
    restored = PolicyVersion.objects.get(number=3)
    assert (restored.text, restored.restores, restored.note) == (OPEN, 1, "rollback to v1")
    assert AuditEntry.objects.filter(action="policy.rollback", actor=operator).count() == 1

    before = written()
    missing = operator_client.post(f"{URL}versions/99/rollback/", {"note": "back"})
    assert missing.status_code == 400
    assert "there is no version 99" in missing.content.decode()
    long = operator_client.post(f"{URL}versions/1/rollback/", {"note": "x" * 1001})
    assert long.status_code == 400
    assert "note: Ensure this value has at most 1000 characters" in long.content.decode()
    assert written() == before


def test_with_two_operators_an_apply_waits_for_another(
    operator_client: Client, catalog: Agent, operator: Any, django_user_model: Any, settings: Any
) -> None:
    settings.TOOLOPS_POLICY_TWO_PERSON = True
    apply_policy(OPEN, note="open")
    assert apply(operator_client, GOOD, note="close it").status_code == 302
    proposal = PolicyVersion.objects.get(number=2)
    assert proposal.state == "proposed" and versions.active_version().number == 1

    page = operator_client.get(URL).content.decode()
    waiting = re.search(
        r'<article class="policy-proposal" id="proposal-2">(.*?)</article>', page, re.S
    )
    assert waiting is not None
    assert "close it" in waiting.group(1) and "d-add" in waiting.group(1)
    assert "You proposed it: another operator must confirm it" in waiting.group(1)

    before = written()
    own = operator_client.post(f"{URL}versions/2/confirm/")
    assert own.status_code == 400
    assert "another operator must confirm your own proposal" in own.content.decode()
    assert written() == before and PolicyVersion.objects.get(pk=proposal.pk).state == "proposed"

    second = logged_in(make_user(django_user_model, "oscar", "operators"))
    assert second.post(f"{URL}versions/2/confirm/").status_code == 302
    confirmed = PolicyVersion.objects.get(pk=proposal.pk)
    assert confirmed.state == "applied" and confirmed.confirmed_by.username == "oscar"
    assert versions.active_version().pk == proposal.pk

    assert apply(operator_client, OPEN, note="reopen").status_code == 302
    number = PolicyVersion.objects.get(state="proposed").number
    assert second.post(f"{URL}versions/{number}/withdraw/").status_code == 302
    assert PolicyVersion.objects.get(number=number).state == "withdrawn"
    gone = second.post(f"{URL}versions/{number}/withdraw/")
    assert gone.status_code == 400 and "is not a proposal" in gone.content.decode()
