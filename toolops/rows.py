"""Model instances from hand-written SQL, for the few hot-path queries where the ORM's
query compilation costs more than the database (~0.5 ms a query on this class of
machine). The column list and value converters are the ORM's own, computed once."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from django.db import connection
from django.db.models import Model

M = TypeVar("M", bound=Model)
Converter = Callable[[Any, Any, Any], Any]


class RowLoader(Generic[M]):
    def __init__(self, model: type[M]) -> None:
        self.model = model
        self.fields = list(model._meta.concrete_fields)
        self.attnames = [f.attname for f in self.fields]
        self._converters: list[tuple[int, list[Converter], Any]] | None = None

    @functools.cache  # noqa: B019 - loaders live as long as the process
    def columns(self, alias: str) -> str:
        quote = connection.ops.quote_name
        return ", ".join(f"{alias}.{quote(f.column)}" for f in self.fields)

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


def _prepared(instance: Model, fields: Sequence[Any], add: bool) -> list[Any]:
    return [f.get_db_prep_save(f.pre_save(instance, add), connection) for f in fields]


@functools.cache
def insert_fields(model: type[Model], *, skip: tuple[str, ...] = ()) -> tuple[Any, ...]:
    meta = model._meta
    return tuple(f for f in meta.concrete_fields if f is not meta.auto_field and f.name not in skip)


@functools.cache
def columns(fields: tuple[Any, ...]) -> str:
    return ", ".join(connection.ops.quote_name(f.column) for f in fields)


def values_sql(
    instances: Sequence[Model],
    fields: Sequence[Any],
    *,
    typed: bool = False,
    related_saved: bool = True,
) -> tuple[str, list[Any]]:
    """`(…), (…)` rows of parameters for `fields`. typed=True casts each parameter to its
    column's type, for VALUES lists that are not directly under an INSERT (where
    PostgreSQL cannot infer a NULL's type)."""
    for obj in instances if related_saved else ():
        # A related object saved after it was assigned (a read's call is inserted last):
        # take its primary key now, as Model.save() does.
        obj._prepare_related_fields_for_save(operation_name="insert")
    casts = [_cast(f) if typed else "" for f in fields]
    row = "(" + ", ".join(f"%s{cast}" for cast in casts) + ")"
    params = [value for obj in instances for value in _prepared(obj, fields, add=True)]
    return ", ".join([row] * len(instances)), params


@functools.cache
def _cast(field: Any) -> str:
    return f"::{field.db_type(connection)}"


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
        f"RETURNING {quote(meta.pk.column)}"
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
    meta = instance._meta
    fields = [meta.get_field(name) for name in field_names]
    quote = connection.ops.quote_name
    sets = ", ".join(f"{quote(f.column)} = %s" for f in fields)
    sql = f"UPDATE {quote(meta.db_table)} SET {sets} WHERE {quote(meta.pk.column)} = %s"
    return sql, [*_prepared(instance, fields, add=False), instance.pk]


def update(instance: Model, field_names: Sequence[str]) -> int:
    """UPDATE these fields of one row by primary key; the number of rows changed."""
    sql, params = update_sql(instance, field_names)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount
