"""Fast bulk UPDATE of many rows with different values, in one statement per batch.

Django's `bulk_update` builds a CASE expression per field and row, which costs seconds for the ten thousand wait
explanations a large cycle writes. On PostgreSQL the rows travel as one array per column
(`UPDATE ... FROM unnest(%s::bigint[], %s::varchar[], ...)`): a handful of parameters whatever the number of rows,
so neither Django nor the driver builds and parses a query with tens of thousands of placeholders. Elsewhere
(SQLite) it is `UPDATE ... FROM (VALUES ...)`. Values are prepared by the model fields either way, so datetimes and
JSON are adapted as Django would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.db.models import Field, Model

BATCH = {"postgresql": 20_000, "sqlite": 2000}  # rows per statement (SQLite limits a statement's parameters)


def bulk_set(model: type[Model], fields: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> int:
    """Set `fields` of each row's object: every row is (pk, value for fields[0], value for fields[1], ...)."""
    if not rows:
        return 0
    meta = model._meta
    columns = [meta.pk, *(meta.get_field(name) for name in fields)]
    statement = _unnest_update if connection.vendor == "postgresql" else _values_update
    size = BATCH.get(connection.vendor, BATCH["sqlite"])
    updated = 0
    with connection.cursor() as cursor:
        for start in range(0, len(rows), size):
            sql, params = statement(meta.db_table, columns, rows[start:start + size])
            cursor.execute(sql, params)
            updated += cursor.rowcount
    return updated


def _prepared(columns: Sequence[Field], rows: Sequence[tuple[Any, ...]]) -> list[list[Any]]:
    """The rows' values as the database takes them, one list per column."""
    return [[column.get_db_prep_value(row[i], connection, prepared=False) for row in rows]
            for i, column in enumerate(columns)]


def _assignments(columns: Sequence[Field]) -> str:
    quote = connection.ops.quote_name
    return ", ".join(f"{quote(c.column)} = v.c{i}" for i, c in enumerate(columns) if i)


def _unnest_update(table: str, columns: Sequence[Field], rows: Sequence[tuple[Any, ...]]) -> tuple[str, list]:
    quote = connection.ops.quote_name
    arrays = ", ".join(f"%s::{c.db_type(connection)}[]" for c in columns)
    names = ", ".join(f"c{i}" for i in range(len(columns)))
    sql = (f"UPDATE {quote(table)} SET {_assignments(columns)} FROM unnest({arrays}) AS v({names}) "  # noqa: S608
           f"WHERE {quote(table)}.{quote(columns[0].column)} = v.c0")
    return sql, _prepared(columns, rows)


def _values_update(table: str, columns: Sequence[Field], rows: Sequence[tuple[Any, ...]]) -> tuple[str, list]:
    quote = connection.ops.quote_name
    placeholder = "(" + ", ".join(["%s"] * len(columns)) + ")"
    aliases = ", ".join(f"column{i + 1} AS c{i}" for i in range(len(columns)))
    values = ", ".join([placeholder] * len(rows))
    sql = (f"UPDATE {quote(table)} SET {_assignments(columns)} FROM (SELECT {aliases} FROM (VALUES {values}) AS t) "  # noqa: S608
           f"AS v WHERE {quote(table)}.{quote(columns[0].column)} = v.c0")
    by_column = _prepared(columns, rows)
    return sql, [by_column[i][r] for r in range(len(rows)) for i in range(len(columns))]
