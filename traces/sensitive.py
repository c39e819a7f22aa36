"""Redaction (DESIGN.md "Tracing"): what ToolOps stores, exports, logs and shows of a
call's args, results and errors has its sensitive values replaced.

Redacted, at any depth:
- the value under a key whose name contains password, passwd, secret, token, api_key,
  apikey, authorization, card, cvv, cvc, iban or ssn (any case; also passphrase, cookie,
  session, private_key, social_security and a key named exactly `pan`);
- the fields a tool names in the catalog (`redact = ["field", "a.b"]`, dotted paths from
  the root of the args and of the result; a list on the way applies the rest of the
  path to each item), and properties its JSON Schema marks `"x-sensitive": true` or
  `"writeOnly": true`;
- inside any string: e-mail addresses, and Luhn-valid card-shaped numbers: 13–19 digits
  whole or grouped as cards are written (4-4-4-4…, 4-6-5), never a part of a longer
  number, an identifier or a decimal fraction (CARD);
- inside any string: the literal values redacted from the call's own args, so a result
  or an error message that echoes them gives nothing away.

The last two apply to a dict's keys as well as to its values: an address, a card number
or a literal of the call used as a key (`{"cc": {"ann@example.com": "cc"}}`) is scrubbed
like any string, and the key's literal joins the secrets scrubbed from text. Two keys
scrubbed to the same name both stay: the later ones get " #2", " #3", … (KEY_NUMBER).

It runs on every call's write path, so the common case — nothing sensitive — must cost
microseconds: a key is judged once per process (cached: its name, and whether it needs a
closer look), and a string is looked at only for an "@" or a run of 13 digits or
separators before anything slower runs."""

from __future__ import annotations

import functools
import json
import logging
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

REDACTED = "[redacted]"
EMAIL_MARK = "[redacted email]"
CARD_MARK = "[redacted card]"
# Every mark starts so: a stored value holding one may have a sealed original.
MARK = "[redacted"
MARKS = re.compile(r"\[redacted(?: email| card)?\]")
# Literal values shorter than this are not scrubbed from free text: "123" (a CVC) would
# match too much ordinary text. Patterns and key names still catch them where they stand.
MIN_SCRUB_LEN = 6

SENSITIVE_KEY = re.compile(
    r"password|passwd|passphrase|secret|token|api[-_]?key|authori[sz]ation|card|cvv|cvc|"
    r"iban|ssn|cookie|session|private[-_]?key|social[-_]?security|^pan$",
    re.IGNORECASE,
)
# Bounded repeats: an unbounded local part would make a long string with one "@" cost
# quadratic time. No "'" in the local part (valid, but rare): a quoted address
# ('ann@example.com') would lose its opening quote.
EMAIL = re.compile(r"[\w.%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){1,8}")
# A card-shaped number: 13–19 digits written whole, or in groups of 4 (the last of 1–4,
# or a 4 and then 1–3: 19 digits), or 4-6-4/5 (American Express, Diners), with one
# separator throughout; starting with 2–6, the payment cards' issuers (ISO/IEC 7812:
# Mastercard 2 and 5, American Express, Diners and JCB 3, Visa 4, Discover and UnionPay
# 6). Never a part of a longer number, of an identifier (a hex trace id) or of a decimal
# fraction. Any 13+ digits are Luhn-valid one time in ten: without these rules a float
# ("succeeded in 0.0111896789999262s"), a trace id or a Unix time in milliseconds (which
# starts with 1 until 2033) would be taken for a card.
CARD = re.compile(
    r"(?<![0-9A-Za-z.])[2-6](?:"
    r"[0-9]{12,18}"
    r"|[0-9]{3}(?P<s>[ -])[0-9]{4}(?P=s)[0-9]{4}(?P=s)(?:[0-9]{4}(?:(?P=s)[0-9]{1,3})?|[0-9]{1,3})"
    r"|[0-9]{3}(?P<t>[ -])[0-9]{6}(?P=t)[0-9]{4,5}"
    r")(?![0-9A-Za-z]|\.[0-9])"
)
# A cheap first look (a necessary condition for a card number), ~10× faster than
# CARD on digit-heavy strings such as timestamps.
MAYBE_CARD = re.compile(r"[0-9 -]{13}")

# How a scrubbed key that would take a name its dict already has is told apart:
# "[redacted email]", "[redacted email] #2", … Never a key lost: each value stays, and
# every key of the stored form holds a mark, so it is seen as redacted (has_mark).
KEY_NUMBER = "{name} #{number}"

# A catalog path's end: everything under it is redacted.
LEAF: dict[str, Any] = {}
PathTree = dict[str, Any]


@functools.lru_cache(maxsize=8192)
def _key_rules(key: Any) -> tuple[bool, int]:
    """(whether the value under `key` is sensitive by its name, the key's reach). A walk
    scrubs the key itself when its reach is at least its shortest secret's length: a key
    that may hold an e-mail address, a card number or a mark reaches any; another
    reaches as far as it is long. Judged once per key: a dict's keys are mostly the same
    few names, call after call, and most are too short to hold a secret."""
    if not isinstance(key, str):
        # Only a string key is scrubbed (as only strings are searched among values: a
        # number is more often a timestamp than a card); its name is still judged.
        return SENSITIVE_KEY.search(str(key)) is not None, 0
    look = "@" in key or MARK in key or MAYBE_CARD.search(key) is not None
    # A key scrubbed to "[redacted card]" names no card field: what it holds is judged as
    # it was under the card number, in the walk's second pass and on every later showing.
    name = MARKS.sub("", key) if MARK in key else key
    return SENSITIVE_KEY.search(name) is not None, sys.maxsize if look else len(key)


def luhn_valid(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        digit = ord(char) - 48
        if index % 2:
            digit = digit * 2 - 9 if digit > 4 else digit * 2
        total += digit
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    shown = match.group()
    digits = shown.replace(" ", "").replace("-", "")
    if luhn_valid(digits):
        return CARD_MARK
    # 4-4-4-4 and a short group after it: the short group may be no part of the card
    # (an expiry, a CVC: "4111 1111 1111 1111 123").
    if len(digits) > 16 and shown[4] in " -" and luhn_valid(digits[:16]):
        return CARD_MARK + shown[19:]
    return shown


class Secrets:
    """Literal values to take out of text, longest first, found in time that grows with
    the text and not with their number. A few are looked for one by one (`in`, C-fast);
    past FEW, by the first MIN_SCRUB_LEN characters at each place of the text: args that
    carry thousands of values under sensitive keys, each scrubbed from thousands of
    strings, would otherwise cost their product (seconds for one call)."""

    FEW = 8
    __slots__ = ("all", "heads", "short")

    def __init__(self, secrets: Sequence[str]) -> None:
        self.all = tuple(secrets)
        self.heads: dict[str, list[str]] | None = None
        self.short: tuple[str, ...] = ()
        if len(self.all) > self.FEW:
            self.heads = {}
            for secret in self.all:  # longest first, kept so in each bucket
                if len(secret) >= MIN_SCRUB_LEN:
                    self.heads.setdefault(secret[:MIN_SCRUB_LEN], []).append(secret)
            self.short = tuple(s for s in self.all if len(s) < MIN_SCRUB_LEN)

    def __bool__(self) -> bool:
        return bool(self.all)

    def take_out(self, text: str) -> str:
        if self.heads is None:
            for secret in self.all:
                if secret in text:
                    text = text.replace(secret, REDACTED)
            return text
        heads = self.heads
        found: set[str] = set()
        for start in range(len(text) - MIN_SCRUB_LEN + 1):
            bucket = heads.get(text[start : start + MIN_SCRUB_LEN])
            if bucket is not None:
                found.update(s for s in bucket if text.startswith(s, start))
        found.update(s for s in self.short if s in text)
        for secret in sorted(found, key=len, reverse=True):
            text = text.replace(secret, REDACTED)
        return text


def scrub(text: str, secrets: Sequence[str] | Secrets = ()) -> str:
    """`text` with the literal `secrets` (longest first), e-mail addresses and card
    numbers replaced."""
    if secrets:
        matcher = secrets if isinstance(secrets, Secrets) else Secrets(secrets)
        text = matcher.take_out(text)
    if "@" in text:
        text = EMAIL.sub(EMAIL_MARK, text)
    if MAYBE_CARD.search(text) is not None:
        text = CARD.sub(_card, text)
    return text


@functools.lru_cache(maxsize=1024)
def path_tree(paths: tuple[str, ...]) -> PathTree | None:
    """("a", "b.c") → {"a": LEAF, "b": {"c": LEAF}}; a shorter path wins over a longer."""
    if not paths:
        return None
    tree: PathTree = {}
    for path in paths:
        node = tree
        parts = path.split(".")
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if child is LEAF:
                break
            node = child
        else:
            node[parts[-1]] = LEAF
    return tree


@dataclass(frozen=True)
class Redaction:
    value: Any
    # The literal values taken out (for scrubbing them from text), longest first.
    secrets: tuple[str, ...]
    changed: bool
    # A string of the value already held a mark ("[redacted email]" quoted back by the
    # agent): its stored form could be taken for a redacted one.
    marked: bool = False


def redact_value(
    value: Any,
    *,
    paths: Sequence[str] = (),
    schema: dict[str, Any] | None = None,
    secrets: Sequence[str] = (),
) -> Redaction:
    """A redacted copy of `value` (the same object when nothing was redacted)."""
    walk = _Walk(secrets)
    out = walk.value(value, schema, path_tree(tuple(paths)))
    found = tuple(sorted(set(walk.found), key=len, reverse=True))
    if set(found) - set(secrets):
        # A value taken out under a sensitive key may also stand inside another string
        # (an API key quoted in a message): scrub it there too, in a second pass over
        # what is already redacted. Only when something sensitive was found.
        out = _Walk(found).value(out, None, None)
    return Redaction(out if walk.changed else value, found, walk.changed, walk.marked)


class _Walk:
    __slots__ = ("changed", "found", "has_secrets", "marked", "secrets", "shortest")

    def __init__(self, secrets: Sequence[str]) -> None:
        self.secrets = Secrets(secrets)
        self.has_secrets = bool(secrets)  # an attribute: read for every string walked
        # A key shorter than every secret holds none: most keys are short names. With no
        # secrets, only a key that may hold an e-mail, a card or a mark reaches this.
        self.shortest = (min(map(len, secrets)) or 1) if secrets else sys.maxsize
        self.found: list[str] = []
        self.changed = False
        self.marked = False

    def value(self, value: Any, schema: dict[str, Any] | None, tree: PathTree | None) -> Any:
        if isinstance(value, str):
            if MARK in value:
                self.marked = True
            # The common case inline: nothing to look for, nothing found.
            if not self.has_secrets and "@" not in value and MAYBE_CARD.search(value) is None:
                return value
            new = scrub(value, self.secrets)
            if new != value:
                self.changed = True
            return new
        if isinstance(value, dict):
            props = schema.get("properties") if schema else None
            if not isinstance(props, dict):
                props = None
            out: dict[Any, Any] = {}
            shortest = self.shortest
            # A scrubbed key's name → the last number it took ("… #2"): each clash costs
            # one step, however many keys scrub to one name.
            numbered: dict[str, int] = {}
            for key, item in value.items():
                sensitive, reach = _key_rules(key)
                # Stored under its scrubbed name; key names, catalog paths and schemas
                # judge the key as it was sent.
                name = self.key(key, value, out, numbered) if reach >= shortest else key
                sub = props.get(key) if props else None
                if sub is not None and not isinstance(sub, dict):
                    sub = None
                branch = tree.get(key) if tree else None
                if item is None or item is True or item is False or item == "":
                    out[name] = item  # nothing to hide in a null, a boolean or ""
                elif (
                    branch is LEAF
                    or sensitive
                    or (sub is not None and (sub.get("x-sensitive") or sub.get("writeOnly")))
                ):
                    self._take(item)
                    out[name] = REDACTED
                else:
                    out[name] = self.value(item, sub, branch)
            return out
        if isinstance(value, list):
            items = schema.get("items") if schema else None
            sub = items if isinstance(items, dict) else None
            return [self.value(item, sub, tree) for item in value]
        return value

    def key(
        self, key: Any, siblings: dict[Any, Any], out: dict[Any, Any], numbered: dict[str, int]
    ) -> Any:
        """`key` as it may be stored: scrubbed like any string. A key scrubbed is taken out
        like a value (its literal joins the secrets), and gets a name that neither a key
        of its dict nor one already written has, so no value is lost."""
        if not isinstance(key, str):
            return key
        if MARK in key:
            self.marked = True
        new = scrub(key, self.secrets)
        if new == key:
            return key
        self._take(key)
        name, number = new, numbered.get(new, 1)
        while name in siblings or name in out:
            number += 1
            name = KEY_NUMBER.format(name=new, number=number)
        numbered[new] = number
        return name

    def _take(self, item: Any) -> None:
        """A value redacted whole: remember its literal parts, to scrub them from text."""
        self.changed = True
        if isinstance(item, dict):
            for sub in item.values():
                self._take(sub)
        elif isinstance(item, list):
            for sub in item:
                self._take(sub)
        elif not _empty(item):
            text = item if isinstance(item, str) else str(item)
            if len(text) >= MIN_SCRUB_LEN:
                self.found.append(text)
                # As it reads inside a JSON body echoed in an error message.
                escaped = json.dumps(text, ensure_ascii=False)[1:-1]
                if escaped != text:
                    self.found.append(escaped)


def _empty(item: Any) -> bool:
    return item is None or isinstance(item, bool) or item == ""


def redact(
    value: Any, schema: dict[str, Any] | None = None, *, spec: Any = None, result: bool = False
) -> Any:
    """A redacted copy of a call's args (or, `result=True`, its result), for showing: by
    the rules of its tool `spec` (a ToolSpec: its `redact` paths and its schema's marks),
    or of a bare JSON `schema`; with neither, by key names and patterns alone."""
    paths: tuple[str, ...] = ()
    if spec is not None:
        paths = tuple(spec.redact)
        if schema is None:
            schema = spec.result_schema if result else spec.params_schema
    return redact_value(value, paths=paths, schema=schema).value


def has_mark(value: Any) -> bool:
    """Whether a stored value holds a redaction mark, in a value or in a key (so it may
    have a sealed original)."""
    if isinstance(value, str):
        return MARK in value
    if isinstance(value, dict):
        return any(has_mark(key) or has_mark(item) for key, item in value.items())
    if isinstance(value, list):
        return any(has_mark(item) for item in value)
    return False


def merged(*groups: Iterable[str]) -> tuple[str, ...]:
    """Secrets from several sources, deduplicated, longest first."""
    return tuple(sorted({s for group in groups for s in group}, key=len, reverse=True))


class RedactingFilter(logging.Filter):
    """Installed on every handler in settings.LOGGING: e-mail addresses and card numbers
    never reach a log line, whoever logged them (ToolOps' own lines carry no args)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string is the logging module's to report
            return True
        clean = scrub(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub(record.exc_text)
        if record.stack_info:
            record.stack_info = scrub(record.stack_info)
        return True
