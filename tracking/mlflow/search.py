"""`runs/search`: MLflow's filter strings and order_by clauses on Tidal's runs.

Supported: clauses joined by AND, each `<entity>.<key> <op> <value>` with the key bare, in backticks or in double
quotes:
- `metrics.<key>` compared (=, !=, <, <=, >, >=) with a number, on the metric's latest value;
- `params.<key>` and `tags.<key>` with =, !=, LIKE, ILIKE (% and _ wildcards), IN and NOT IN ('a', 'b');
- `attributes.status`, `run_name`, `run_id` as strings, `start_time` and `end_time` as numbers (ms).
Anything else is INVALID_PARAMETER_VALUE, never silently ignored.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Expression, F, FloatField, OrderBy, Q, QuerySet, TextField, Value
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Cast, NullIf

from tracking.mlflow.errors import invalid
from tracking.mlflow.translate import RUN_NAME_TAG, from_ms, pk_of

ENTITIES = {"metric": "metrics", "metrics": "metrics", "param": "params", "params": "params",
            "parameter": "params", "parameters": "params", "tag": "tags", "tags": "tags",
            "attribute": "attributes", "attributes": "attributes", "attr": "attributes", "run": "attributes"}
# MLflow attribute -> (Run field, kind)
ATTRIBUTES = {"status": ("status", "text"), "run_name": ("name", "text"), "run_id": ("id", "id"),
              "start_time": ("started_at", "time"), "end_time": ("ended_at", "time")}
NUMBER_OPS = {"=": "exact", "<": "lt", "<=": "lte", ">": "gt", ">=": "gte"}
TEXT_OPS = {"=", "!=", "LIKE", "ILIKE", "IN", "NOT IN"}

_KEY = r"(?P<entity>[A-Za-z_]+)\.(?P<key>`[^`]+`|\"[^\"]+\"|[\w.\-/:]+?)"
_VALUE = r"(?P<value>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\((?:[^()'\"]|'[^']*'|\"[^\"]*\")*\)|[-+]?[\w.]+)"
# A word comparator stands apart from the key before it: `params.learning_rate` is a key, not `learn` IN `g_rate`.
_OP = r"(?P<op>!=|<=|>=|=|<|>|(?<![\w.\-/:])(?:NOT\s+ILIKE|NOT\s+LIKE|ILIKE|LIKE|NOT\s+IN|IN)\b)"
CLAUSE = re.compile(rf"\s*{_KEY}\s*{_OP}\s*{_VALUE}\s*", re.IGNORECASE)
AND = re.compile(r"AND\s", re.IGNORECASE)
ORDER = re.compile(r"\s*(?:(?P<entity>[A-Za-z_]+)\.)?(?P<key>`[^`]+`|\"[^\"]+\"|[\w.\-/:]+?)"
                   r"(?:\s+(?P<direction>ASC|DESC))?\s*", re.IGNORECASE)
STRING = re.compile(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"")
STRINGS = re.compile(rf"\s*(?:{STRING.pattern})(?:\s*,\s*(?:{STRING.pattern}))*\s*")
# MLflow's server parses a filter with sqlparse, which stops at 10,000 tokens (some 1,100 clauses) and its database
# at what it cannot plan. Tidal refuses before building any query: more clauses than this (SQLite parses 1,000 ANDed
# conditions no more: its expression tree is at most 1,000 deep, and a `!=` clause is two conditions), and more
# values compared than this (a clause counts one, an IN list one per item: a statement takes at most 32,766
# parameters on SQLite, 65,535 on PostgreSQL).
MAX_FILTER_CLAUSES = 200
MAX_FILTER_VALUES = 1_000
# MLflow sets no number of its own (its SQL store refuses a key given twice, and the database what it cannot plan:
# PostgreSQL sorts by at most 1,664 columns); a run table sorts by a few.
MAX_ORDER_BY = 100


@dataclass(frozen=True)
class Clause:
    entity: str  # metrics, params, tags or attributes
    key: str
    op: str  # upper case, single spaces
    value: str  # as written (quotes and parentheses included)


def parse_filter(text: str) -> list[Clause]:
    clauses, position, values = [], 0, 0
    while position < len(text):
        match = CLAUSE.match(text, position)
        if match is None:
            raise invalid(f"Invalid filter {text[:200]!r} at {text[position:position + 40]!r}: expected "
                          "<metrics|params|tags|attributes>.<key> <comparator> <value>.")
        entity = ENTITIES.get(match["entity"].lower())
        if entity is None:
            raise invalid(f"Invalid entity {match['entity']!r} in filter; use metrics, params, tags or attributes.")
        clause = Clause(entity, _unquote_key(match["key"]), " ".join(match["op"].upper().split()), match["value"])
        values += len(_strings(clause.value)) if clause.op in ("IN", "NOT IN") else 1
        if values > MAX_FILTER_VALUES:
            raise invalid(f"The filter compares with more than {MAX_FILTER_VALUES:,} values (a clause counts one, an "
                          f"IN list one per item); at most {MAX_FILTER_VALUES:,}.")
        clauses.append(clause)
        if len(clauses) > MAX_FILTER_CLAUSES:
            raise invalid(f"The filter has more than {MAX_FILTER_CLAUSES} clauses; at most {MAX_FILTER_CLAUSES}.")
        position = match.end()
        if position < len(text):
            joined = AND.match(text, position)
            if joined is None:
                raise invalid(f"Invalid filter {text[:200]!r}: clauses are joined with AND.")
            position = joined.end()
    return clauses


def _unquote_key(key: str) -> str:
    return key[1:-1] if key[:1] in "`\"" else key


def _string(value: str) -> str:
    match = STRING.fullmatch(value)
    if match is None:
        raise invalid(f"Expected a quoted string, got {value[:100]}.")
    found = match[1] if match[1] is not None else match[2]
    return re.sub(r"\\(.)", r"\1", found)


def _strings(value: str) -> list[str]:
    if not (value.startswith("(") and value.endswith(")")):
        raise invalid(f"IN takes a list of quoted strings in parentheses, got {value[:100]}.")
    if STRINGS.fullmatch(value, 1, len(value) - 1) is None:
        raise invalid(f"IN takes a list of quoted strings in parentheses, got {value[:100]}.")
    return [re.sub(r"\\(.)", r"\1", m[1] if m[1] is not None else m[2])
            for m in STRING.finditer(value, 1, len(value) - 1)]


def _number(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise invalid(f"Expected a number, got {value[:100]}.") from None


def _like(pattern: str) -> str:
    """SQL LIKE's % and _ as a regular expression (what both SQLite and PostgreSQL match with Django's regex)."""
    return "^" + "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern) + "$"


def metric_value(key: str) -> Expression:
    """The metric's latest value; NULL when it was NaN or infinite (the summary keeps those as JSON null, which
    SQLite's key transform reads as the text 'null', a 0.0 once cast)."""
    last = KeyTextTransform("last", KeyTransform(key, "summary"))
    return Cast(NullIf(last, Value("null")), FloatField())


def text_value(key: str, field: str) -> Expression:
    """A param or tag as plain text: the key transform's own lookups would compare JSON values, not strings."""
    return Cast(KeyTextTransform(key, field), TextField())


def _expression(clause: Clause) -> tuple[Expression | F, str]:
    """What a clause compares, and its kind (number, text, id or time)."""
    if clause.entity == "metrics":
        return metric_value(clause.key), "number"
    if clause.entity == "tags" and clause.key == RUN_NAME_TAG:
        return F("name"), "text"
    if clause.entity in ("params", "tags"):
        return text_value(clause.key, clause.entity), "text"
    if clause.key not in ATTRIBUTES:
        raise invalid(f"Invalid attribute {clause.key!r}; one of {', '.join(ATTRIBUTES)}.")
    field, kind = ATTRIBUTES[clause.key]
    return F(field), kind


def _condition(alias: str, clause: Clause, kind: str) -> Q:
    op = clause.op
    if kind in ("number", "time"):
        if op != "!=" and op not in NUMBER_OPS:
            raise invalid(f"Invalid comparator {op!r} for {clause.entity}.{clause.key}; use =, !=, <, <=, > or >=.")
        number = _number(clause.value)
        value: float | datetime = number
        if kind == "time":
            if not math.isfinite(number):
                raise invalid(f"{clause.key} takes a time in milliseconds, got {clause.value[:100]}.")
            value = from_ms(int(number))
        if op == "!=":
            return ~Q(**{alias: value}) & Q(**{f"{alias}__isnull": False})
        return Q(**{f"{alias}__{NUMBER_OPS[op]}": value})
    if op not in TEXT_OPS:
        raise invalid(f"Invalid comparator {op!r} for {clause.entity}.{clause.key}; use =, !=, LIKE, ILIKE, IN or "
                      "NOT IN.")
    strings = _strings(clause.value) if op in ("IN", "NOT IN") else [_string(clause.value)]
    values: list[str] | list[int] = strings
    if kind == "id":  # run ids are strings in MLflow: one that names no run matches nothing
        values = [pk for pk in map(pk_of, strings) if pk is not None]
        if op in ("LIKE", "ILIKE"):
            raise invalid("run_id takes =, !=, IN or NOT IN.")
    present = Q(**{f"{alias}__isnull": False})
    if op == "=":
        return Q(**{f"{alias}__in": values[:1]})
    if op == "!=":
        return ~Q(**{f"{alias}__in": values[:1]}) & present
    if op == "IN":
        return Q(**{f"{alias}__in": values})
    if op == "NOT IN":
        return ~Q(**{f"{alias}__in": values}) & present
    return Q(**{f"{alias}__{'regex' if op == 'LIKE' else 'iregex'}": _like(strings[0])})


def apply_filter(runs: QuerySet, text: str) -> QuerySet:
    """The runs matching every clause, as one query built once (a query rebuilt per clause cost the square of their
    number: 1,000 clauses took 5 s)."""
    aliases: dict[str, Expression | F] = {}
    conditions: list[Q] = []
    for number, clause in enumerate(parse_filter(text)):
        expression, kind = _expression(clause)
        alias = f"mlflow_filter_{number}"
        aliases[alias] = expression
        conditions.append(_condition(alias, clause, kind))
    return runs.alias(**aliases).filter(*conditions) if conditions else runs


def order(runs: QuerySet, order_by: list[str]) -> QuerySet:
    """MLflow's order: the given clauses, then the newest start first and the run id (a stable page order)."""
    if len(order_by) > MAX_ORDER_BY:
        raise invalid(f"order_by has {len(order_by):,} terms; at most {MAX_ORDER_BY}.")
    terms: list[OrderBy] = []
    seen: set[tuple[str, str]] = set()
    for raw in order_by:
        match = ORDER.fullmatch(raw)
        if match is None:
            raise invalid(f"Invalid order_by clause {raw[:200]!r}; use <entity>.<key> [ASC|DESC].")
        entity = ENTITIES.get((match["entity"] or "attributes").lower())
        if entity is None:
            raise invalid(f"Invalid entity in order_by clause {raw[:200]!r}.")
        key = _unquote_key(match["key"])
        if (entity, key) in seen:  # as MLflow's store refuses it
            raise invalid(f"`order_by` contains duplicate fields: {raw[:200]!r}.")
        seen.add((entity, key))
        expression, _kind = _expression(Clause(entity, key, "=", ""))
        descending = (match["direction"] or "ASC").upper() == "DESC"
        terms.append(expression.desc(nulls_last=True) if descending else expression.asc(nulls_last=True))
    return runs.order_by(*terms, F("started_at").desc(), F("id").desc())
