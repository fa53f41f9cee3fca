"""SCD type 2 settings: validation in ``TableSpec``/``PipelineConfig``, TOML loading and the
tracked columns they select (``silver.history.tracked_columns``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lakehouse_core.config import PipelineConfig, TableSpec, load_config
from lakehouse_core.errors import ConfigError
from silver.history import tracked_columns

pytestmark = pytest.mark.unit


def test_type_1_is_the_default_and_has_no_history() -> None:
    spec = TableSpec(name="customers", topic="t")
    assert (spec.stored_as_scd_type, spec.history_name) == (1, None)
    assert TableSpec(name="customers", topic="t", stored_as_scd_type=2).history_name == (
        "customers_history"
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"stored_as_scd_type": 3}, r"Invalid stored_as_scd_type 3 for table 'c'\. Must be 1"),
        ({"stored_as_scd_type": True}, r"Invalid stored_as_scd_type True for table 'c'"),
        (
            {"track_history_column_list": ("name",)},
            r"Table 'c': track_history_column_list only applies to history tables; "
            r"set stored_as_scd_type = 2",
        ),
        (
            {"track_history_except_column_list": ("name",)},
            r"Table 'c': track_history_except_column_list only applies to history tables",
        ),
        (
            {
                "stored_as_scd_type": 2,
                "track_history_column_list": ("name",),
                "track_history_except_column_list": ("notes",),
            },
            r"set either track_history_column_list or track_history_except_column_list, not both",
        ),
        (
            {"stored_as_scd_type": 2, "track_history_column_list": ()},
            r"track_history_column_list is empty; name the columns",
        ),
        (
            {"stored_as_scd_type": 2, "track_history_except_column_list": ("a b",)},
            r"Invalid column of table 'c' 'a b'",
        ),
        (
            {"name": "c" * 121, "stored_as_scd_type": 2},
            r"Invalid history table name of 'c{121}' 'c{121}_history'",
        ),
    ],
    ids=["type-3", "type-bool", "list-type-1", "except-type-1", "both", "empty", "bad", "long"],
)
def test_invalid_history_settings(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        TableSpec(**{"name": "c", "topic": "t", **kwargs})


def test_a_table_cannot_take_the_name_of_a_history_table() -> None:
    customers = TableSpec(name="customers", topic="pg.customers", stored_as_scd_type=2)
    clash = TableSpec(name="customers_history", topic="pg.other")
    with pytest.raises(
        ConfigError,
        match=r"Table 'customers_history', the history table of 'customers' "
        r"\(stored_as_scd_type = 2\); declare it in \[\[tables\]\] with another name\.",
    ):
        PipelineConfig(tables=(customers, clash))
    assert PipelineConfig(tables=(TableSpec(name="customers", topic="a"), clash))


def test_an_undeclared_topic_cannot_map_to_a_history_table() -> None:
    config = PipelineConfig(
        tables=(TableSpec(name="customers", topic="pg.customers", stored_as_scd_type=2),)
    )
    with pytest.raises(
        ConfigError,
        match=r"Topic 'pg.public.customers_history' maps to table 'customers_history', the "
        r"history table of 'customers'",
    ):
        config.spec_for_topic("pg.public.customers_history")
    assert config.spec_for_topic("pg.public.orders").name == "orders"


def test_load_config_reads_history_settings(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.toml"
    path.write_text(
        """
[[tables]]
name = "customers"
topic = "pg.public.customers"
stored_as_scd_type = 2
track_history_except_column_list = ["updated_at"]
""",
        encoding="utf-8",
    )
    assert load_config(path).tables == (
        TableSpec(
            name="customers",
            topic="pg.public.customers",
            stored_as_scd_type=2,
            track_history_except_column_list=("updated_at",),
        ),
    )


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ('stored_as_scd_type = "two"', r"Invalid stored_as_scd_type 'two' for table"),
        (
            "stored_as_scd_type = true",
            r"'stored_as_scd_type' in \[\[tables\]\] must be an integer or a string",
        ),
        (
            'track_history_column_list = "name"',
            r"'track_history_column_list' in \[\[tables\]\] must be a list of strings",
        ),
        (
            "track_history_except_column_list = [1]",
            r"'track_history_except_column_list' in \[\[tables\]\] must be a string",
        ),
    ],
)
def test_load_config_rejects_wrong_history_types(
    tmp_path: Path, setting: str, message: str
) -> None:
    path = tmp_path / "pipeline.toml"
    path.write_text(f'[[tables]]\nname = "c"\ntopic = "t"\n{setting}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_config(path)


COLUMNS = ["id", "name", "notes", "updated_at"]


@pytest.mark.parametrize(
    ("tracking", "expected"),
    [
        ({}, COLUMNS),
        ({"track_history_column_list": ("notes", "name")}, ["notes", "name"]),
        ({"track_history_except_column_list": ("updated_at",)}, ["id", "name", "notes"]),
    ],
    ids=["all", "list", "except"],
)
def test_tracked_columns(tracking: dict[str, Any], expected: list[str]) -> None:
    spec = TableSpec(name="customers", topic="t", stored_as_scd_type=2, **tracking)
    assert tracked_columns(spec, COLUMNS) == expected


@pytest.mark.parametrize(
    "setting", ["track_history_column_list", "track_history_except_column_list"]
)
def test_tracked_columns_must_exist(setting: str) -> None:
    spec = TableSpec(name="customers", topic="t", stored_as_scd_type=2, **{setting: ("nmae",)})
    with pytest.raises(
        ConfigError,
        match=rf"Table 'customers': {setting} names column\(s\) nmae that the table does not "
        r"have; its columns are id, name, notes, updated_at\.",
    ):
        tracked_columns(spec, COLUMNS)
