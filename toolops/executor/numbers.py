"""Numbers in args, bounded before any conversion (API.md "Conventions"): a magnitude past
1e308 or an exponent past ±1000 is refused. `Decimal("1e9999999")` is cheap to make but
costly to use — `int()` of it takes minutes with the GIL held, `normalize()` overflows —
so a number written as a string is read by a regex first, its exponent worked out from
the text, and only a string within the bounds becomes a Decimal. Pure Python."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

MAGNITUDE_MAX = Decimal("1e308")
EXPONENT_MAX = 1000
RULE = f"numbers must be at most 1e308 in magnitude, with an exponent within ±{EXPONENT_MAX}"

# ASCII only: Decimal() also takes other scripts' digits, underscores and "Infinity".
_NUMBER = re.compile(r"([+-]?)(?:([0-9]+)(?:\.([0-9]*))?|\.([0-9]+))(?:[eE]([+-]?[0-9]+))?")
_NUMBER_START = frozenset("+-.0123456789")
_EXPONENT_CHARS = len(str(EXPONENT_MAX)) + 1  # a sign and 4 digits; past that, past the bound
_INT_MAX = 10**308
# Past 200 significant digits ToolOps' decimals are refused anyway (canonical.MAX_DIGITS);
# this bounds what the regex and Decimal() are given to read.
MAX_CHARS = 2048


class NumberBoundError(ValueError):
    """A number past the bounds; the message says which rule."""


def decimal_of(text: str) -> Decimal | None:
    """The number a string writes (white space around it allowed), None if it writes none.
    Raises NumberBoundError past the bounds, found from the text alone."""
    text = text.strip()
    if len(text) > MAX_CHARS:
        if text[:1] in _NUMBER_START:
            raise NumberBoundError(f"{_shown(text)}: a number of more than {MAX_CHARS} characters")
        return None
    match = _NUMBER.fullmatch(text)
    if match is None:
        return None
    _sign, whole, point, only, exponent = match.groups()
    written = 0
    if exponent is not None:
        digits = exponent.lstrip("+-").lstrip("0")  # leading zeros are free to send
        if len(digits) > _EXPONENT_CHARS or int(digits or "0") > EXPONENT_MAX:
            raise NumberBoundError(f"{_shown(text)}: {RULE}")
        written = -int(digits or "0") if exponent.startswith("-") else int(digits or "0")
    integral = (whole or "").lstrip("0")
    fraction = point or only or ""
    if integral:
        adjusted = len(integral) - 1 + written
    else:
        significant = fraction.lstrip("0")
        if not significant:
            return Decimal(text)  # a zero: its exponent is already bounded
        adjusted = written - (len(fraction) - len(significant)) - 1
    if adjusted > 308 or adjusted < -EXPONENT_MAX:
        raise NumberBoundError(f"{_shown(text)}: {RULE}")
    number = Decimal(text)
    if abs(number) > MAGNITUDE_MAX:
        raise NumberBoundError(f"{_shown(text)}: {RULE}")
    return number


def in_bounds(value: Any) -> bool:
    """Whether a JSON number (int or float, not bool) is within the magnitude bound.
    NaN and the infinities are not judged here: no JSON parser of ToolOps makes them, and
    what has no canonical form is refused when made canonical."""
    if type(value) is int:
        return -_INT_MAX <= value <= _INT_MAX
    if type(value) is float:
        return not 1e308 < abs(value) < math.inf
    return True


def _shown(text: str) -> str:
    return repr(text[:40] + "…") if len(text) > 40 else repr(text)
