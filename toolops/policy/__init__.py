"""The agent policy (API.md "Agent policy", docs/policy.md): which agent may call which
tool, rules on the args in Cedar, and spend limits that hold under races.

    document.py   the TOML read and checked, every error named by table and field
    cedar.py      conditions in Cedar: the schema from the catalog, validation, evaluation
    models.py     versions of the document, and the spend counters
    active.py     the version in force, compiled once per process per apply
    verdict.py    one call's verdict: not granted, refused, held, lifted, what it reserves
    limits.py     calendar periods, and the counter rows reservations update
    wording.py    the sentences the model and people read
    versions.py   apply, rollback, confirm: validated, versioned and audited
"""
