"""The bounds of every number the API stores, in one place for the call body's fast check
(inputs.py) and the serializers (fields.py), which must give the same answers.

Each bound is what its column holds on PostgreSQL. SQLite would store more in an integer
column (any 64-bit integer), and a number past the column used to fail there as a 500,
after the run was read and, for a `read` tool, after the tool had run: the stricter
database's bound, checked before any of that, makes the answer a 400 naming the field on
both. Plain constants, no Django: the fast check imports them."""

from __future__ import annotations

INT4_MAX = 2**31 - 1  # PositiveIntegerField on PostgreSQL
BIGINT_MAX = 2**63 - 1  # PositiveBigIntegerField

STEP_INDEX_MAX = INT4_MAX  # ToolCall.step_index
MAX_ATTEMPTS_MAX = INT4_MAX  # Run.max_attempts
MAX_TOKENS_MAX = BIGINT_MAX  # Run.max_tokens

# ToolCall.tokens is a bigint, but a call's tokens add up: into Run.tokens_used (a bigint)
# and into the run's usage summed from its calls. Bounded per call rather than summed with
# saturation, because every statement that adds them (the claim's, the record's, the
# budget's) would need its own clamp, in both databases' dialects. At this bound the sum
# can overflow only after 2**32 calls at the bound in one run: four billion rows, and
# thirteen years at the default rate limit of 600 calls a minute. Still far beyond what
# any model spends on one step (a million tokens is a whole context window).
TOKENS_MAX = INT4_MAX

# Run.max_seconds is a double, which holds 1e308; but the run's deadline, its creation
# plus max_seconds, must stay a time that every clock reading it holds: Python's datetime
# ends in the year 9999 (a timedelta at 999,999,999 days), PostgreSQL's timestamps in
# 294276. 10**9 s (31 years) is far past any run and far within both.
MAX_SECONDS_MAX = 1e9

WAIT_MAX = 30.0  # API.md: `wait` is 0–30 s
