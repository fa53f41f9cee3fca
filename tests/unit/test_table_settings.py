"""Table settings: their validation (TableSpec, TOML) and the model's behaviour (conditions:
tests/unit/test_conditions.py).

The model (``silver.reference.fold``) is what the Spark job is checked against, so each
setting's semantics from docs/silver-semantics.md is pinned here on hand-made records.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import fields, replace
from pathlib import Path
from types import UnionType
from typing import Any, Literal, get_args, get_origin, get_type_hints

import pytest
from pyspark.sql.types import IntegerType, StringType

from cdc.debezium import ColumnCodec
from cdc.records import Record
from lakehouse.declare import cdc_table
from lakehouse_core.config import TableSpec, load_config
from lakehouse_core.errors import ConfigError
from lakehouse_core.loader import TableShape
from lakehouse_core.specs import DATABRICKS_FORMS, TableSettings, table_settings
from silver.parse import RowLayout
from silver.reference import TOAST_PLACEHOLDER, BronzeRecord, FoldSpec, fold
from silver.settings import kept_layout
from silver.verify import fold_spec
from tests.helpers import CUSTOMER_FIELDS, bronze_record, pg_envelope, pg_key

pytestmark = pytest.mark.unit

TOPIC = "app.users"

# --------------------------------------------------------------------------------------------
# TableSpec validation
# --------------------------------------------------------------------------------------------


def test_standard_debezium_table_needs_no_settings() -> None:
    spec = TableSpec(name="customers", topic="pg.public.customers")
    assert spec.condition("apply_as_deletes") is None
    assert spec.condition("apply_as_truncates") is None
    assert not spec.ignore_null_updates
    assert all(spec.keeps_column(column) for column in ("name", "notes", "anything"))


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"column_list": ("a",), "except_column_list": ("b",)},
            r"^Table 'users': set either 'column_list' \(the columns to keep\) or "
            r"'except_column_list' \(the columns to drop\), not both\.$",
        ),
        (
            {"keys": ("id",), "except_column_list": ("name", "id")},
            r"^Table 'users': 'except_column_list' lists 'id', but key and metadata columns "
            r"are always kept\. Remove it from the list\.$",
        ),
        ({"column_list": ("a-b",)}, r"^Invalid column of table 'users' 'a-b'"),
        ({"except_column_list": ("",)}, r"^Invalid column of table 'users' ''"),
        (
            {"schema": "id int"},
            r"^Table 'users': 'schema' is for format 'events' only; .* Remove 'schema'\.$",
        ),
        (
            {"apply_as_deletes": "op IN (SELECT op FROM t)"},
            r"^Unsupported condition 'op IN \(SELECT op FROM t\)' for apply_as_deletes of table "
            r"'users': IN takes a list of values, not a subquery",
        ),
        (
            {"apply_as_truncates": "op = 't' AND"},
            r"^Unsupported condition \"op = 't' AND\" for apply_as_truncates of table 'users'",
        ),
    ],
    ids=["both-lists", "key-excluded", "bad-name", "empty-name", "schema", "deletes", "truncates"],
)
def test_table_spec_rejects(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        TableSpec(name="users", topic=TOPIC, **settings)


def test_column_selection() -> None:
    listed = TableSpec(name="users", topic=TOPIC, column_list=("name", "ghost"))
    assert [c for c in ("name", "email") if listed.keeps_column(c)] == ["name"]
    excluded = TableSpec(name="users", topic=TOPIC, except_column_list=("email",))
    assert [c for c in ("name", "email") if excluded.keeps_column(c)] == ["name"]


def codec(name: str) -> ColumnCodec:
    return ColumnCodec(name, StringType(), lambda c: c, True)


def test_kept_layout_keeps_keys_and_refuses_excluding_a_record_key() -> None:
    layout = RowLayout(
        keys=(ColumnCodec("id", IntegerType(), lambda c: c, False),),
        columns=(codec("id"), codec("name"), codec("email")),
    )
    kept = kept_layout(layout, TableSpec(name="users", topic=TOPIC, column_list=("email",)))
    assert [c.name for c in kept.columns] == ["id", "email"]
    assert kept.keys == layout.keys
    # The default Debezium key is only known from the records: refused when it is seen.
    for excluded in ("id", "_sequence"):
        spec = TableSpec(name="users", topic=TOPIC, except_column_list=(excluded,))
        with pytest.raises(ConfigError, match=f"lists '{excluded}', but key and metadata"):
            kept_layout(layout, spec)


# --------------------------------------------------------------------------------------------
# TOML
# --------------------------------------------------------------------------------------------


def write_toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pipeline.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_load_config_reads_every_setting(tmp_path: Path) -> None:
    path = write_toml(
        tmp_path,
        """
[[tables]]
name = "users"
topic = "app.users"
format = "events"
keys = ["id"]
sequence_by = ["seq"]
apply_as_deletes = "operation = 'DELETE'"
apply_as_truncates = "operation = 'TRUNCATE'"
except_column_list = ["operation"]
ignore_null_updates = true

[[tables]]
name = "customers"
topic = "pg.public.customers"
column_list = ["name"]
deletion_vectors = true
""",
    )
    assert load_config(path).tables == (
        TableSpec(
            name="users",
            topic="app.users",
            format="events",
            keys=("id",),
            sequence_by=("seq",),
            apply_as_deletes="operation = 'DELETE'",
            apply_as_truncates="operation = 'TRUNCATE'",
            except_column_list=("operation",),
            ignore_null_updates=True,
        ),
        TableSpec(
            name="customers",
            topic="pg.public.customers",
            column_list=("name",),
            deletion_vectors=True,
        ),
    )


TABLE = '[[tables]]\nname = "users"\ntopic = "app.users"\n'


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            "ignore_null_update = true",
            r"^Unknown setting\(s\) ignore_null_update in \[\[tables\]\]\. Allowed: "
            r"apply_as_deletes, apply_as_truncates, column_list, deletion_vectors, "
            r"except_column_list, expect, expect_or_drop, expect_or_fail, format, "
            r"ignore_null_updates, ignore_null_updates_column_list, "
            r"ignore_null_updates_except_column_list, keys, name, on_incompatible_type, "
            r"on_type_mismatch, resnapshot, schema, "
            r"sequence_by, stored_as_scd_type, system_sequence_by, tombstone_retention_days, "
            r"topic, track_history_column_list, "
            r"track_history_except_column_list, type_widening\.$",
        ),
        (
            'ignore_null_updates = "yes"',
            r"^Setting 'ignore_null_updates' in \[\[tables\]\] must be true or false, not 'yes'\.$",
        ),
        (
            "ignore_null_updates = 1",
            r"^Setting 'ignore_null_updates' in \[\[tables\]\] must be true or false, not 1\.$",
        ),
        (
            "apply_as_deletes = true",
            r"^Setting 'apply_as_deletes' in \[\[tables\]\] must be a string, not True\.$",
        ),
        (
            'column_list = "name"',
            r"^Setting 'column_list' in \[\[tables\]\] must be a list of strings, not 'name'\.$",
        ),
        (
            "except_column_list = [1]",
            r"^Setting 'except_column_list' in \[\[tables\]\] must be a string, not 1\.$",
        ),
        (
            'column_list = ["a"]\nexcept_column_list = ["b"]',
            r"^Table 'users': set either 'column_list'",
        ),
        (
            'apply_as_truncates = "x > rand()"',
            r"^Unsupported condition 'x > rand\(\)' for apply_as_truncates of table 'users': "
            r"function 'rand' is not allowed",
        ),
        (
            'deletion_vectors = "on"',
            r"^Setting 'deletion_vectors' in \[\[tables\]\] must be true or false, not 'on'\.$",
        ),
    ],
    ids=[
        "unknown",
        "bool-string",
        "bool-int",
        "condition-bool",
        "list-string",
        "list-item",
        "both",
        "grammar",
        "deletion-vectors-string",
    ],
)
def test_load_config_rejects(tmp_path: Path, setting: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(write_toml(tmp_path, f"{TABLE}{setting}\n"))


# --------------------------------------------------------------------------------------------
# The model: events streams
# --------------------------------------------------------------------------------------------

EVENTS = FoldSpec(format="events", keys=("id",), sequence_by=("seq",))


def event(offset: int, **value: Any) -> BronzeRecord:
    """An ``events`` record (partition 0) whose value is ``value``."""
    return BronzeRecord(TOPIC, 0, offset, None, json.dumps(value).encode())


def rows(records: list[BronzeRecord], spec: FoldSpec) -> dict[Any, dict[str, Any]]:
    """The folded table without metadata columns, by the first key value."""
    result = fold(records, spec)
    assert not result.quarantined
    return {
        key[0]: {k: v for k, v in row.items() if not k.startswith("_")}
        for key, row in result.rows.items()
    }


def test_model_apply_as_deletes_is_a_remembered_delete() -> None:
    spec = replace(EVENTS, apply_as_deletes="operation = 'DELETE'")
    records = [
        event(0, id=1, seq=1, operation="INSERT", name="a"),
        event(1, id=1, seq=3, operation="DELETE", name=None),
        event(2, id=1, seq=2, operation="UPDATE", name="late"),  # older than the delete
        event(3, id=2, seq=1, operation="INSERT", name="b"),
        event(4, id=2, seq=2, operation="DELETE", name=None),
        event(5, id=2, seq=4, operation="INSERT", name="again"),  # newer: re-inserted
        event(6, id=3, seq=1, operation=None, name="null operation is not a delete"),
    ]
    assert rows(records, spec) == {
        2: {"id": 2, "seq": 4, "operation": "INSERT", "name": "again"},
        3: {"id": 3, "seq": 1, "operation": None, "name": "null operation is not a delete"},
    }


def test_model_apply_as_truncates_removes_every_older_row() -> None:
    spec = replace(
        EVENTS,
        apply_as_truncates="operation = 'TRUNCATE'",
        apply_as_deletes="operation = 'DELETE'",
    )
    records = [
        event(0, id=1, seq=1, operation="INSERT"),
        event(1, id=2, seq=5, operation="INSERT"),
        event(2, id=9, seq=3, operation="TRUNCATE"),
        event(3, id=3, seq=2, operation="INSERT"),  # older than the truncate: ignored
        event(4, id=4, seq=4, operation="INSERT"),
    ]
    assert sorted(rows(records, spec)) == [2, 4]


@pytest.mark.parametrize(
    ("condition", "deleted"),
    [
        ("status = 'gone'", [1]),
        ("status <> 'gone'", [2]),  # null status: unknown, not deleted
        ("NOT status = 'gone'", [2]),
        ("status IS NULL", [3]),
        ("status IS NOT NULL", [1, 2]),
        ("status = 'gone' OR status IS NULL", [1, 3]),
        ("NOT (status = 'gone' AND n = 1)", [2]),  # for 3: NOT (unknown AND true) = unknown
        ("n = 1 AND status IS NULL", [3]),
        ("n = '1'", []),  # the job refuses a string compared with a number; here: unknown
        ("flag = TRUE", [2]),
        ("flag = 1", []),  # likewise a boolean compared with a number
    ],
)
def test_model_condition_three_valued_logic(condition: str, deleted: list[int]) -> None:
    spec = replace(EVENTS, apply_as_deletes=condition)
    records = [
        event(0, id=1, seq=1, status="gone", n=1, flag=False),
        event(1, id=2, seq=1, status="here", n=2, flag=True),
        event(2, id=3, seq=1, status=None, n=1, flag=None),
    ]
    assert sorted({1, 2, 3} - set(rows(records, spec))) == deleted


def test_model_column_lists_keep_keys_and_metadata() -> None:
    records = [event(0, id=1, seq=1, operation="INSERT", name="a", email="e")]
    listed = replace(EVENTS, column_list=("name", "ghost"))
    assert list(fold(records, listed).rows[(1,)]) == [
        "id",
        "name",
        "_sequence",
        "_op",
        "_source_ts",
        "_bronze_topic",
        "_bronze_partition",
        "_bronze_offset",
    ]
    excluded = replace(EVENTS, except_column_list=("operation", "seq"))
    assert rows(records, excluded) == {1: {"id": 1, "name": "a", "email": "e"}}


def test_model_ignore_null_updates_on_events() -> None:
    spec = replace(EVENTS, ignore_null_updates=True)
    records = [
        event(0, id=1, seq=1, name="a", email="a@x"),
        event(1, id=1, seq=2, name=None, email="b@x"),  # null: unchanged
        event(2, id=1, seq=3, email="c@x"),  # absent: unchanged too
        event(3, id=2, seq=1, name=None, email="new"),  # an insert keeps its nulls
    ]
    assert rows(records, spec) == {
        1: {"id": 1, "seq": 3, "name": "a", "email": "c@x"},
        2: {"id": 2, "seq": 1, "name": None, "email": "new"},
    }
    assert rows(records, EVENTS)[1] == {"id": 1, "seq": 3, "name": None, "email": "c@x"}


# --------------------------------------------------------------------------------------------
# The model: Debezium tables (partial columns with deletes, TOAST placeholders)
# --------------------------------------------------------------------------------------------

CUSTOMERS = "pg.public.customers"


def pg(offset: int, op: str, key: int, lsn: int, **after: Any) -> BronzeRecord:
    """A wrapped Debezium Postgres event of the customers table (id, name, notes)."""
    image = None if op == "d" else {"id": key, "name": None, "notes": None, **after}
    before = {"id": key, "name": None, "notes": None} if op == "d" else None
    value = pg_envelope(op, (100, lsn), after=image, before=before, fields=CUSTOMER_FIELDS)
    return bronze_record(Record(CUSTOMERS, 0, offset, 0, pg_key(key), value))


def test_model_ignore_null_updates_and_toast_on_debezium() -> None:
    records = [
        pg(0, "c", 1, 10, name="a", notes="long"),
        pg(1, "u", 1, 20, name=None, notes=TOAST_PLACEHOLDER),  # both unchanged
        pg(2, "c", 2, 10, name="b", notes="x"),
        pg(3, "d", 2, 20),
        pg(4, "c", 2, 30, name=None, notes=TOAST_PLACEHOLDER),  # after a delete: no previous
        pg(5, "r", 3, 5, name=None, notes="snapshot"),  # no previous: keeps its null
        pg(6, "u", 3, 15, name="c", notes=None),
    ]
    partial = FoldSpec(ignore_null_updates=True)
    assert rows(records, partial) == {
        1: {"id": 1, "name": "a", "notes": "long"},
        2: {"id": 2, "name": None, "notes": TOAST_PLACEHOLDER},
        3: {"id": 3, "name": "c", "notes": "snapshot"},
    }
    # Without the setting, a null is a value and only the placeholder means "unchanged".
    assert rows(records, FoldSpec()) == {
        1: {"id": 1, "name": None, "notes": "long"},
        2: {"id": 2, "name": None, "notes": TOAST_PLACEHOLDER},
        3: {"id": 3, "name": "c", "notes": None},
    }


def test_model_apply_as_deletes_on_debezium_reads_the_after_image() -> None:
    spec = FoldSpec(apply_as_deletes="name = 'erased' OR id = 3")
    records = [
        pg(0, "c", 1, 10, name="a"),
        pg(1, "u", 1, 20, name="erased"),
        pg(2, "u", 1, 15, name="late, older"),
        pg(3, "c", 2, 10, name=None),
        pg(4, "c", 3, 10, name="x"),
    ]
    assert rows(records, spec) == {2: {"id": 2, "name": None, "notes": None}}


def test_databricks_forms_of_the_settings_are_taken(tmp_path: Path) -> None:
    toml = (
        '[[tables]]\nname = "users"\ntopic = "app.users"\nformat = "events"\nkeys = "userId"\n'
        'sequence_by = "sequenceNum"\nsystem_sequence_by = "commitSeq"\n'
        'stored_as_scd_type = "2"\nignore_null_updates_column_list = ["city"]\n'
    )
    (spec,) = load_config(write_toml(tmp_path, toml)).tables

    assert (spec.keys, spec.sequence_by, spec.stored_as_scd_type) == (
        ("userId",),
        ("sequenceNum",),
        2,
    )
    assert spec.order_columns == ("sequenceNum", "commitSeq")
    assert (spec.ignores_nulls_of("city"), spec.ignores_nulls_of("name")) == (True, False)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {
                "ignore_null_updates_column_list": ("a",),
                "ignore_null_updates_except_column_list": (),
            },
            "either 'ignore_null_updates_column_list' or",
        ),
        (
            {"system_sequence_by": "lsn", "format": "debezium", "keys": None, "sequence_by": None},
            "set sequence_by too",
        ),
        ({"stored_as_scd_type": "3"}, "Invalid stored_as_scd_type '3'"),
        ({"sequence_by": "_sequence"}, "column name '_sequence' is reserved"),
        ({"system_sequence_by": "_Op", "sequence_by": "ts"}, "column name '_Op' is reserved"),
    ],
)
def test_databricks_settings_are_checked(settings: dict[str, Any], message: str) -> None:
    base: dict[str, Any] = {"name": "t", "topic": "t", "format": "events", "keys": ("id",)}
    base["sequence_by"] = ("seq",)
    with pytest.raises(ConfigError, match=re.escape(message)):
        TableSpec(**{**base, **settings})


# --------------------------------------------------------------------------------------------
# One declaration of each setting: TableSpec; the others derive from it or are checked here
# --------------------------------------------------------------------------------------------


def _python_form(annotation: Any, setting: str) -> set[Any]:
    """The types a Python declaration takes for a spec field of type ``annotation``: a tuple
    of strings as any sequence, a choice as a string, and the setting's Databricks form."""
    kinds = get_args(annotation) if get_origin(annotation) is UnionType else (annotation,)
    forms = {
        Sequence[str] if get_origin(k) is tuple else str if get_origin(k) is Literal else k
        for k in kinds
    }
    return forms | ({DATABRICKS_FORMS[setting]} if setting in DATABRICKS_FORMS else set())


def test_python_declarations_take_every_setting_of_the_spec_in_its_type() -> None:
    """TableSettings (the keywords of cdc_table and events_table, written out for type
    checkers) has each setting of TableSpec, in the type its Python users write."""
    spec_types = get_type_hints(TableSpec)
    declared = get_type_hints(TableSettings)
    missing = [s for s in table_settings() if s not in declared]
    assert not missing, f"add {missing} to TableSettings (lakehouse_core/specs.py)"
    assert set(declared) == set(table_settings()), "TableSettings has a setting TableSpec lacks"
    for setting in table_settings():
        kinds = get_args(declared[setting]) or (declared[setting],)
        assert set(kinds) == _python_form(spec_types[setting], setting), setting


def test_the_toml_shape_and_the_fold_read_the_settings_of_the_spec() -> None:
    """The [[tables]] shape has a field for each field of TableSpec (its expectations as the
    expect tables), and the fold's view takes each setting it shares with the spec."""
    allowed = {f.alias or n for n, f in TableShape.model_fields.items()}
    spec_fields = {f.name for f in fields(TableSpec)} - {"expectations"}
    assert allowed == spec_fields | {"expect", "expect_or_drop", "expect_or_fail"}
    spec = TableSpec(
        name="users",
        topic=TOPIC,
        keys=("id",),
        sequence_by=("seq",),
        system_sequence_by="tie",
        apply_as_deletes="op = 'D'",
        column_list=("id", "name"),
        ignore_null_updates_column_list=("name",),
        on_type_mismatch="rescue",
        resnapshot="full",
    )
    view = fold_spec(spec, None)
    for setting in {f.name for f in fields(FoldSpec)} & set(table_settings()) - {"sequence_by"}:
        assert getattr(view, setting) == getattr(spec, setting), setting
    assert view.sequence_by == ("seq", "tie")


def test_a_declaration_with_a_setting_tables_lack_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r"^cdc_table\(\) has no setting colum_list\. Allowed: "):
        cdc_table("users", topic=TOPIC, colum_list=["id"])  # type: ignore[call-arg]
