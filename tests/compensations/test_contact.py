"""The customer's contact on a ticket (compensations/contact.py): marked in the catalog
(`contact = ["email"]`, refused when it names no declared field), shown to support staff
as a link, read deliberately from the full args and audited like every full-args read —
once per page, not on every live refresh."""

# ruff: noqa: F811

from __future__ import annotations

from typing import Any

import pytest

from compensations.contact import ticket_contact_read
from compensations.models import Ticket
from tests.console.conftest import fast_password_hashing, logged_in, support  # noqa: F401
from toolops.audit.models import AuditEntry
from toolops.models import Agent, ToolCall
from toolops.tools.catalog import CatalogError, parse

from .desk_catalog import EMAIL, desk_catalog, refund_dead_lettered  # noqa: F401

pytestmark = pytest.mark.django_db


def tool(**fields: Any) -> dict[str, Any]:
    return {
        "tool": [
            {
                "name": "charge",
                "kind": "irreversible",
                "url": "http://127.0.0.1:9/payments/charges",
                "params_schema": {"type": "object", "properties": {"email": {"type": "string"}}},
                **fields,
            }
        ]
    }


@pytest.mark.parametrize(
    ("contact", "field", "problem"),
    [
        (["mail"], "contact[0]", "'mail' is not a field of params_schema (it declares email)"),
        ("email", "contact", "must be a list of field paths"),
        (["e mail"], "contact[0]", "is not a field path"),
    ],
)
def test_the_catalog_refuses_a_contact_that_names_no_field(
    contact: Any, field: str, problem: str
) -> None:
    with pytest.raises(CatalogError) as refused:
        parse(tool(contact=contact))

    assert refused.value.tool == "charge" and refused.value.field == field
    assert problem in str(refused.value)


def test_the_catalog_takes_a_declared_contact() -> None:
    [spec] = parse(tool(contact=["email"]))

    assert spec.contact == ("email",)


def test_support_sees_the_contact_as_a_link_each_look_audited(
    support: Any, agent_a: tuple[Agent, str], desk_catalog: Any
) -> None:
    ticket = refund_dead_lettered(agent_a[0])
    client = logged_in(support)

    page = client.get(f"/console/tickets/{ticket.pk}/").content.decode()
    client.get(f"/console/tickets/{ticket.pk}/", HTTP_HX_REQUEST="true")  # a live refresh

    assert (
        f'Contact the customer: <a class="contact-link" href="mailto:{EMAIL}">{EMAIL}</a>' in page
    )
    # Everywhere else the args read redacted.
    assert page.count(EMAIL) == 2
    [entry] = AuditEntry.objects.filter(action="full_args.read")
    charge = ticket.compensation.call
    assert (entry.actor_username, entry.object_id) == ("sam", charge.call_id)
    detail = {"purpose": "ticket_contact", "tool": "charge", "field": "email"}
    assert entry.detail == {**detail, "ticket": ticket.pk}
    assert EMAIL not in entry.summary


def test_the_contact_comes_from_another_call_of_the_run(
    support: Any, agent_a: tuple[Agent, str], desk_catalog: Any
) -> None:
    ticket = refund_dead_lettered(agent_a[0])
    charge = ticket.compensation.call
    charge.args = {k: v for k, v in charge.args.items() if k != "email"}
    charge.save(update_fields=["args"])

    contact = ticket_contact_read(ticket=ticket, user=support)

    assert contact is not None and (contact.tool, contact.value) == ("create_order", EMAIL)


def test_no_contact_no_look(support: Any, agent_a: tuple[Agent, str], desk_catalog: Any) -> None:
    ticket = refund_dead_lettered(agent_a[0])
    for call in ToolCall.objects.filter(run=ticket.run, args__has_key="email"):
        call.args = {k: v for k, v in call.args.items() if k != "email"}
        call.save(update_fields=["args"])

    page = logged_in(support).get(f"/console/tickets/{ticket.pk}/").content.decode()

    assert "Contact the customer" not in page
    assert not AuditEntry.objects.filter(action="full_args.read").exists()


def test_a_sealed_contact_that_cannot_be_read_says_so(
    support: Any, agent_a: tuple[Agent, str], desk_catalog: Any
) -> None:
    ticket = refund_dead_lettered(agent_a[0])
    # Stored redacted, its sealed copy gone: the page must not pass the mark off as the value.
    ToolCall.objects.filter(run=ticket.run, args__has_key="email").update(
        args={"order_id": "ord_1", "email": "[redacted email]"}
    )
    ticket = Ticket.objects.get(pk=ticket.pk)

    page = logged_in(support).get(f"/console/tickets/{ticket.pk}/").content.decode()

    assert "Contact the customer:" not in page
    assert "The customer's contact (email of charge): it is kept sealed and could not" in page
    assert AuditEntry.objects.filter(action="full_args.read").count() == 1


def test_only_support_may_read_it(
    reviewer: Any, agent_a: tuple[Agent, str], desk_catalog: Any
) -> None:
    from django.core.exceptions import PermissionDenied

    ticket = refund_dead_lettered(agent_a[0])

    with pytest.raises(PermissionDenied):
        ticket_contact_read(ticket=ticket, user=reviewer)
    assert not AuditEntry.objects.filter(action="full_args.read").exists()
