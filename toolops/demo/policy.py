"""The demo's agent policy (toolops/demo/policy.toml, docs/policy.md): applied by
`manage.py demo` when it starts, through the same path as `manage.py policy apply` —
validated, versioned, audited — and only when the version in force reads otherwise, so
that restarting the demo adds no version.

The launcher itself serves no call, so its settings name no catalog; the policy is
checked against the catalog its children load (a policy that names `charge` must meet a
catalog that has it)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from toolops.policy import versions
from toolops.policy.document import PolicyError
from toolops.tools import registry

POLICY_FILE = Path(__file__).resolve().with_name("policy.toml")
SHOWN_PATH = "toolops/demo/policy.toml"
NOTE = f"the demo's policy ({SHOWN_PATH}), applied by manage.py demo"
ACTOR = "demo"
PAGE = "/console/policy/"


def demo_policy_apply(*, catalog: str, text: str | None = None) -> str:
    """Apply the demo's policy unless the version in force reads the same (`text`
    replaces the file's, for tests). The line the launcher prints; a policy that does not
    validate against `catalog` is not applied, and the line says why."""
    text = POLICY_FILE.read_text() if text is None else text
    current = versions.active_version()
    if current is not None and current.text == text:
        return f"Agent policy: v{current.number}, the demo's ({SHOWN_PATH}), already in force"
    previous = settings.TOOLOPS_TOOLS_FILE
    settings.TOOLOPS_TOOLS_FILE = catalog
    registry.reset()
    try:
        version = versions.apply(text, note=NOTE, actor_name=ACTOR)
    except PolicyError as exc:
        kept = f"v{current.number} stays in force" if current is not None else "no policy"
        return f"! Agent policy: {SHOWN_PATH} was not applied ({exc}); {kept}"
    finally:
        settings.TOOLOPS_TOOLS_FILE = previous
        registry.reset()
    replaced = (
        f"; it replaces v{current.number} (by {current.author or 'an unnamed author'})"
        if current is not None
        else ""
    )
    return f"Agent policy: the demo's ({SHOWN_PATH}) applied as v{version.number}{replaced}"
