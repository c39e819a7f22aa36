"""The round trips of one write, each built in one module and read back as a typed row
(docs/architecture.md "The path of one write"):

    context.py   the run and all a call needs of it, in one SELECT    → ContextRow
    claim.py     spend holds, the key's claim, the call row, the run's
                 up-front charge, in one statement                     → Claimed
    result.py    the claim recorded, the result, its attempts, its undo,
                 the run's usage, in one statement                     → bool

On PostgreSQL the claim and the result are each ONE statement (data-modifying CTEs), run
in autocommit: atomic without a BEGIN and COMMIT of their own. SQLite runs no
data-modifying CTE, so each module has, side by side, the same writes as a short
transaction of single statements. `parts.py` holds what both writes build alike."""
