"""Model instances from hand-written SQL, for the few hot-path queries where the ORM's
query compilation costs more than the database (~0.5 ms a query on this class of
machine). The column list and value converters are the ORM's own, computed once."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from django.db.models import Field, Model
from django.db.models.fields import AutoFieldMixin

M = TypeVar("M", bound=Model)
Converter = Callable[[Any, Any, Any], Any]


def column_of(field: object) -> str:
    """The quoted column of a concrete field: the only kind these statements read or
    write (a reverse relation or a generic key has no column of its own)."""
    if not isinstance(field, Field) or field.column is None:
        raise ValueError(f"{field!r} is not a field with a column")
    return connection.ops.quote_name(field.column)


class RowLoader(Generic[M]):
    def __init__(self, model: type[M]) -> None:
        self.model = model
        self.fields = list(model._meta.concrete_fields)
        self.attnames = [f.attname for f in self.fields]
        self._converters: list[tuple[int, list[Converter], Any]] | None = None

    @functools.cache  # noqa: B019 - loaders live as long as the process
    def columns(self, alias: str) -> str:
        return ", ".join(f"{alias}.{column_of(f)}" for f in self.fields)

    def load(self, values: Sequence[Any]) -> M:
        values = list(values[: len(self.fields)])
        for index, converters, col in self._field_converters():
            value = values[index]
            for convert in converters:
                value = convert(value, col, connection)
            values[index] = value
        return self.model.from_db(connection.alias, self.attnames, values)

    def _field_converters(self) -> list[tuple[int, list[Converter], Any]]:
        # What the SQL compiler would apply to each column, e.g. JSON decoding, or
        # SQLite's text datetimes.
        if self._converters is None:
            table = self.model._meta.db_table
            found = []
            for index, field in enumerate(self.fields):
                col = field.get_col(table)
                converters = connection.ops.get_db_converters(col) + col.get_db_converters(
                    connection
                )
                if converters:
                    found.append((index, converters, col))
            self._converters = found
        return self._converters


def _prepared(instance: Model, plan: _Plan, add: bool) -> list[Any]:
    """The parameters of the plan's fields as Model.save() would send them. A plain
    field's value goes as the instance holds it (`_is_plain`); the rest through Django's
    preparation."""
    db = connections[DEFAULT_DB_ALIAS]  # once, not through the proxy at every field
    return [
        getattr(instance, f.attname) if plain else f.get_db_prep_save(f.pre_save(instance, add), db)
        for f, plain in zip(plan.fields, plan.plain, strict=True)
    ]


# Fields whose get_db_prep_save hands the value on unchanged when it is of the field's
# own type (a str, an int, a bool, a float, a related row's pk), as ToolOps' own code
# sets them: Django's preparation only checks that, ~1 µs a field and 30 fields a call
# row. Dates, decimals, JSON, UUIDs and the like keep their preparation.
_PLAIN_TYPES = (
    models.CharField,
    models.TextField,
    models.IntegerField,
    models.BooleanField,
    models.FloatField,
)
_PREPARED_TYPES = (
    models.DateField,
    models.DecimalField,
    models.JSONField,
    models.UUIDField,
    models.BinaryField,
    models.GenericIPAddressField,
    models.DurationField,
    models.FilePathField,
)


def _is_plain(field: Any) -> bool:
    if isinstance(field, models.ForeignKey):
        # An id: an auto field's preparation hands it on as it is.
        target = field.target_field
        return isinstance(target, AutoFieldMixin) or _is_plain(target)
    if isinstance(field, _PREPARED_TYPES) or not isinstance(field, _PLAIN_TYPES):
        return False
    # A field class of its own that prepares or fills in its value keeps doing so.
    kind = type(field)
    return all(
        getattr(kind, name) is getattr(base, name)
        for base in _PLAIN_TYPES
        if isinstance(field, base)
        for name in ("pre_save", "get_db_prep_save", "get_db_prep_value", "get_prep_value")
    )


class _Plan:
    """What a statement needs of a tuple of fields, worked out once per tuple: the
    column list, the row of placeholders, which fields are plain. Keyed by the tuple's
    identity (`_plan`): hashing 30 Field objects (their __hash__ is Python) on every call
    cost more than the rest of building the statement."""

    def __init__(self, fields: tuple[Any, ...]) -> None:
        self.fields = fields
        self.plain = tuple(_is_plain(f) for f in fields)
        self.columns = ", ".join(column_of(f) for f in fields)
        self.row = "(" + ", ".join("%s" for _ in fields) + ")"
        # Cast: for VALUES lists not directly under an INSERT, where PostgreSQL cannot
        # infer a NULL's type.
        self.typed_row = "(" + ", ".join(f"%s::{f.db_type(connection)}" for f in fields) + ")"


_plans: dict[int, _Plan] = {}


def _plan(fields: tuple[Any, ...]) -> _Plan:
    plan = _plans.get(id(fields))
    if plan is None or plan.fields is not fields:  # the plan holds its tuple: ids stay
        plan = _plans[id(fields)] = _Plan(fields)
    return plan


@functools.cache
def insert_fields(model: type[Model], *, skip: tuple[str, ...] = ()) -> tuple[Any, ...]:
    meta = model._meta
    return tuple(f for f in meta.concrete_fields if f is not meta.auto_field and f.name not in skip)


def columns(fields: tuple[Any, ...]) -> str:
    return _plan(fields).columns


def values_sql(
    instances: Sequence[Model],
    fields: tuple[Any, ...],
    *,
    typed: bool = False,
    related_saved: bool = True,
) -> tuple[str, list[Any]]:
    """`(…), (…)` rows of parameters for `fields` (from `insert_fields`). typed=True casts
    each parameter to its column's type."""
    for obj in instances if related_saved else ():
        # A related object saved after it was assigned (a read's call is inserted last):
        # take its primary key now, as Model.save() does.
        # django-stubs leave out this private Model method (Django 5.2 has it).
        obj._prepare_related_fields_for_save(operation_name="insert")  # type: ignore[attr-defined]
    plan = _plan(fields)
    params = [value for obj in instances for value in _prepared(obj, plan, add=True)]
    return ", ".join([plan.typed_row if typed else plan.row] * len(instances)), params


def insert(instances: Sequence[Model]) -> None:
    """INSERT the instances (one model) in one statement, setting their primary keys."""
    if not instances:
        return
    model = type(instances[0])
    fields = insert_fields(model)
    rows, params = values_sql(instances, fields)
    quote = connection.ops.quote_name
    meta = model._meta
    sql = (
        f"INSERT INTO {quote(meta.db_table)} ({columns(fields)}) VALUES {rows} "
        f"RETURNING {column_of(meta.pk)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        pks = [r[0] for r in cursor.fetchall()]
    for obj, pk in zip(instances, pks, strict=True):
        mark_saved(obj, pk)


def mark_saved(obj: Model, pk: Any) -> None:
    obj.pk = pk
    obj._state.adding = False
    obj._state.db = connection.alias


def update_sql(instance: Model, field_names: Sequence[str]) -> tuple[str, list[Any]]:
    """`UPDATE … SET … WHERE pk = …` for these fields of one row."""
    sql, plan = _update_plan(type(instance), tuple(field_names))
    return sql, [*_prepared(instance, plan, add=False), instance.pk]


@functools.cache
def _update_plan(model: type[Model], field_names: tuple[str, ...]) -> tuple[str, _Plan]:
    meta = model._meta
    fields = tuple(meta.get_field(name) for name in field_names)
    sets = ", ".join(f"{column_of(f)} = %s" for f in fields)
    table = connection.ops.quote_name(meta.db_table)
    return f"UPDATE {table} SET {sets} WHERE {column_of(meta.pk)} = %s", _plan(fields)


def update(instance: Model, field_names: Sequence[str]) -> int:
    """UPDATE these fields of one row by primary key; the number of rows changed."""
    sql, params = update_sql(instance, field_names)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount
