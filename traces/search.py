"""The search index of business keys: what a person has (an order id, a charge id, a
customer's e-mail) finds the run that used it, though the value is stored nowhere plain.

A catalog tool names its `searchable` fields (tools/spec.py), and its business key, its
customer's contact and its displayed facts are searched too (`search_paths`: what a
person reads on an approval or a ticket — a customer id — finds the run); when a call's result is
recorded (and, for a call held for a reviewer, when it is held), each such field's value —
from the full args first, then the full result, as tools/facts.py reads them, before
redaction — is normalized and kept only as an HMAC-SHA256 under the search key (SearchKey
rows, written by the executor's record statement). A search computes the same HMAC of
the query. The key is TOOLOPS_SEARCH_KEY, or, unset, one derived from SECRET_KEY under a
label of its own: rotating either makes the rows written before unfindable until
`manage.py reindex_search` writes them again (docs/search.md)."""

from __future__ import annotations

import hashlib
import hmac
import re
import unicodedata
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from django.conf import settings

from toolops.models import ToolCall
from toolops.tools.facts import field_value
from toolops.tools.spec import ToolSpec

from .models import SearchKey
from .sensitive import has_mark
from .vault import args_read, result_read

# Domain separation: this key is unrelated to every other use of SECRET_KEY (sessions,
# CSRF, the span key), and a TOOLOPS_SEARCH_KEY reused elsewhere is too.
SEARCH_KEY_LABEL = b"toolops/search-index/v1"
# Longer values are not ids a person types; they are left out of the index.
MAX_VALUE = 256


def normalized(value: Any) -> str | None:
    """A value as it is indexed and looked up: text or a whole number, trimmed, in NFC,
    an e-mail address in lower case. None for what is not indexed: empty, too long, a
    mark of redaction, or anything but text and whole numbers."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    text = unicodedata.normalize("NFC", str(value)).strip()
    if not text or len(text) > MAX_VALUE or has_mark(text):
        return None
    return text.lower() if is_email(text) else text


def is_email(text: str) -> bool:
    return "@" in text


# A displayed fact is indexed only when its value names something — letters and digits
# mixed (cus_4821, ord_7bd0, D9) or an e-mail address: an amount, a quantity or a
# currency code would find every run.
NAMES_SOMETHING = re.compile(r"(?=.*[A-Za-z])(?=.*[0-9])|@")


def search_paths(spec: ToolSpec | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The fields of `spec`'s calls that find their run: those indexed whatever their
    value (`searchable`, the business key, the contact), and the displayed facts, indexed
    when their value names something."""
    if spec is None:
        return (), ()
    named = tuple(dict.fromkeys((*spec.searchable, *spec.business_key, *spec.contact)))
    return named, tuple(p for p in spec.display if p not in named)


def searches(spec: ToolSpec | None) -> bool:
    """Whether `spec`'s calls write index rows at all (a cheap look, on every record)."""
    return spec is not None and bool(
        spec.searchable or spec.business_key or spec.contact or spec.display
    )


def _fact_names_something(text: str) -> bool:
    return NAMES_SOMETHING.search(text) is not None


@lru_cache(maxsize=4)
def _search_key(secret: str) -> bytes:
    # One HMAC under the secret with a fixed label is a KDF in its own right (as the span
    # key in traces/otel.py): the secret is already a random key.
    return hmac.new(secret.encode(), SEARCH_KEY_LABEL, hashlib.sha256).digest()


def digest(text: str) -> str:
    """HMAC-SHA256 of a normalized value under the search key, as 64 hex characters."""
    secret = settings.TOOLOPS_SEARCH_KEY or settings.SECRET_KEY
    return hmac.new(_search_key(secret), text.encode(), hashlib.sha256).hexdigest()


def search_keys(call: ToolCall, spec: ToolSpec | None) -> list[SearchKey]:
    """The index rows of `call`'s searchable values (none for a tool without searchable
    fields: no look at the args at all). Reads the full args and result this process
    holds in memory (traces/vault.py); a value the vault could not give back is a mark of
    redaction, and is left out."""
    named, facts = search_paths(spec)
    if not named and not facts:
        return []
    args, _ = args_read(call)
    result, _ = result_read(call)
    keys, seen = [], set()
    for path in (*named, *facts):
        text = normalized(field_value(args, result, path))
        if text is None or (path, text) in seen:
            continue
        if path not in named and not _fact_names_something(text):
            continue
        seen.add((path, text))
        keys.append(SearchKey(run_id=call.run_id, call=call, field=path, digest=digest(text)))
    return keys


def search_keys_save(keys: Sequence[SearchKey]) -> None:
    """Write index rows outside the executor's single statements (SQLite; a reindex): a
    row already there stays as it is."""
    if keys:
        SearchKey.objects.bulk_create(keys, ignore_conflicts=True)


def reindex(calls: Iterable[ToolCall], spec_of: Any) -> int:
    """Write the index rows of `calls` again under the current key, dropping their old
    ones; `spec_of(tool)` gives a tool's spec (None when the catalog has it no more).
    The number of rows written."""
    written = 0
    for call in calls:
        keys = search_keys(call, spec_of(call.tool))
        SearchKey.objects.filter(call=call).delete()
        search_keys_save(keys)
        written += len(keys)
    return written
