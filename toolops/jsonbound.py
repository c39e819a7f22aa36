"""JSON from outside, bounded (API.md "Conventions"): nesting at most 64 deep, finite
numbers, number literals that fit a double, integer literals within Python's 4,300-digit
limit, no U+0000 in a string (PostgreSQL's text and jsonb cannot hold it: the insert
failed after a `read` tool had already run), and a bounded width — values in all, keys in
one object, items in one array.
Every entry that parses JSON it did not write goes through here — the API's body parser,
`args` sent as a string, MCP's `tools/call` arguments and `_meta`, console forms — so
that no input reaches a RecursionError, an infinity or a costly number downstream, and
none costs more to check than to refuse.

The width matters because everything after parsing is linear in it: 100,000 keys in a
body under 1 MiB parse in ~30 ms, then cost ~0.5 s of CPU in the schema check, the
canonical form and the key. The bounds are checked right after json's C scanner, before
any of that.

Pure Python, no Django: the checks must cost microseconds on an ordinary body. json's C
scanner does the parsing; the tree is walked only when the text could hold more than the
bounds allow — more than 64 brackets, or more commas, colons and brackets than the
narrowest width bound (counting them is C-fast) — which an ordinary call body never does.
The deployment sets the widths (`configure`, from settings); downstream responses, whose
size has a bound of its own, are parsed with `limits=None`."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

MAX_DEPTH = 64
INT_MAX_DIGITS = 4300  # Python's default int_max_str_digits: past it int() refuses
_INT_BOUND = 10**INT_MAX_DIGITS

DEEP = f"JSON nested deeper than {MAX_DEPTH} arrays/objects is not accepted"
NOT_FINITE = "NaN and Infinity are not JSON: numbers must be finite"
TOO_BIG = "a number literal that does not fit a double (such as 1e999) is not accepted"
TOO_LONG = f"an integer literal longer than {INT_MAX_DIGITS:,} digits is not accepted"
NUL = "a string holding U+0000 (NUL) is not accepted: no database column can store it"
# How JSON text writes U+0000; a raw NUL is not JSON at all (json refuses control characters).
NUL_ESCAPE = "\\u0000"


class JSONBoundError(ValueError):
    """Well-formed enough JSON past one of the bounds; the message names which."""


@dataclass(frozen=True)
class Limits:
    """How wide a JSON text may be: values in all (every object, array, string, number,
    true, false and null counts one), keys in any one object, items in any one array."""

    values: int = 20_000
    keys: int = 1_000
    items: int = 10_000

    @property
    def narrowest(self) -> int:
        return min(self.values, self.keys, self.items)


_configured = Limits()


def configure(limits: Limits) -> None:
    """The widths this deployment accepts (settings: TOOLOPS_JSON_MAX_*), for every
    parse that does not name its own."""
    global _configured
    _configured = limits


def limits() -> Limits:
    return _configured


class _Configured:
    """`limits=` left out: the deployment's widths."""


CONFIGURED: Any = _Configured()


def values_at_most(text: str | bytes) -> int:
    """An upper bound on the values a JSON text holds, from its characters alone: each
    value but the first follows a comma, a colon or an opening bracket. Characters inside
    strings count too, so the bound may be far above the truth, never below it."""
    if isinstance(text, bytes):
        return 1 + text.count(b",") + text.count(b":") + text.count(b"[")
    return 1 + text.count(",") + text.count(":") + text.count("[")


def loads(
    text: str, *, limits: Limits | None = CONFIGURED, nul: Literal["refuse", "replace"] = "refuse"
) -> Any:
    """Parse JSON text within the bounds. Raises JSONBoundError past them, ValueError
    (json.JSONDecodeError) for text that is not JSON. `limits=None`: no width bound.
    `nul="replace"`: a U+0000 in a string becomes U+FFFD instead of being refused (for
    what must be kept, such as a downstream's answer to a write that took effect)."""
    if limits is CONFIGURED:
        limits = _configured
    try:
        value = json.loads(text, parse_constant=_constant, parse_float=_float)
    except RecursionError:
        raise JSONBoundError(DEEP) from None
    except JSONBoundError:
        raise
    except ValueError as exc:
        if "integer string conversion" in str(exc):
            raise JSONBoundError(TOO_LONG) from None
        raise
    deep = text.count("[") + text.count("{") > MAX_DEPTH
    # A text no longer than the narrowest bound cannot hold more of anything than that.
    wide = (
        limits is not None
        and len(text) > limits.narrowest
        and values_at_most(text) > limits.narrowest
    )
    # An escape is the only way JSON text holds a NUL; an escaped backslash before
    # "u0000" is a false alarm, which the walk finds out.
    nuls = NUL_ESCAPE in text
    refuse_nuls = nuls and nul == "refuse"
    if deep or wide or refuse_nuls:
        _walk(value, limits, leaves=False, strings=refuse_nuls, prefix="")
    if nuls and nul == "replace":
        value = _without_nul(value)  # after the walk: no deeper than the bound
    return value


def check(value: Any, *, what: str = "", limits: Limits | None = CONFIGURED) -> None:
    """Hold a tree someone else parsed (the MCP SDK's) to the same bounds: its depth and
    width, its floats finite and within a double, its integers within the digit limit.
    Iterative, so a deep tree cannot exhaust the stack here."""
    if limits is CONFIGURED:
        limits = _configured
    _walk(value, limits, leaves=True, strings=True, prefix=f"{what}: " if what else "")


def _walk(value: Any, limits: Limits | None, *, leaves: bool, strings: bool, prefix: str) -> None:
    """Depth and width of a parsed tree, its numbers (`leaves`) and its strings and keys
    (`strings`). Stops at the first bound passed, so a tree far past the widths costs no
    more than the widths allow."""
    if leaves or strings:
        _leaf(value, prefix)
    stack: list[tuple[Any, int, tuple[Any, ...]]] = [(value, 1, ())]
    values = 1
    while stack:
        node, depth, path = stack.pop()
        kind = type(node)
        if kind is not dict and kind is not list:
            continue
        if depth > MAX_DEPTH:
            raise JSONBoundError(prefix + DEEP)
        size = len(node)
        if limits is not None:
            if kind is dict and size > limits.keys:
                what = f"an object with more than {limits.keys:,} keys"
                raise JSONBoundError(f"{prefix}{what} is not accepted ({_at(path)})")
            if kind is list and size > limits.items:
                what = f"an array with more than {limits.items:,} items"
                raise JSONBoundError(f"{prefix}{what} is not accepted ({_at(path)})")
            values += size
            if values > limits.values:
                raise JSONBoundError(
                    f"{prefix}JSON with more than {limits.values:,} values is not accepted"
                )
        children: Iterable[tuple[Any, Any]] = node.items() if kind is dict else enumerate(node)
        for key, child in children:
            if strings and kind is dict and "\x00" in key:
                raise JSONBoundError(f"{prefix}{NUL} ({_at(path)})")
            child_kind = type(child)
            if child_kind is dict or child_kind is list:
                stack.append((child, depth + 1, (*path, key)))
            elif leaves or strings:
                _leaf(child, prefix, path=(*path, key))


def _leaf(node: Any, prefix: str, path: tuple[Any, ...] = ()) -> None:
    kind = type(node)
    if kind is str and "\x00" in node:
        raise JSONBoundError(f"{prefix}{NUL} ({_at(path)})")
    if kind is float and not math.isfinite(node):
        raise JSONBoundError(prefix + NOT_FINITE)
    if kind is int and not -_INT_BOUND < node < _INT_BOUND:
        raise JSONBoundError(prefix + TOO_LONG)


def _without_nul(node: Any) -> Any:
    """`node` with every U+0000 in its strings and keys replaced by U+FFFD. Recursive: a
    tree deeper than the bound is refused by the walk before anything is stored."""
    kind = type(node)
    if kind is str:
        return node.replace("\x00", "\ufffd")
    if kind is dict:
        out = {}
        for key, value in node.items():
            name = _without_nul(key)
            # "a\x00" beside a key "a\ufffd": neither value is lost.
            while name != key and (name in out or name in node):
                name += "\ufffd"
            out[name] = _without_nul(value)
        return out
    if kind is list:
        return [_without_nul(item) for item in node]
    return node


def _at(path: tuple[Any, ...]) -> str:
    if not path:
        return "at the top level"
    shown = ".".join(str(part) for part in path)
    return f"at {shown[:80]}…" if len(shown) > 80 else f"at {shown}"


def _constant(name: str) -> Any:
    raise JSONBoundError(f"{name}: {NOT_FINITE}")


def _float(text: str) -> float:
    number = float(text)
    if number in (math.inf, -math.inf):
        raise JSONBoundError(f"{text[:40]}: {TOO_BIG}")
    return number
