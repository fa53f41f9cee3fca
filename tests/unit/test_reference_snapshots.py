"""The reference fold's re-snapshot rule (silver/reference_snapshots.py): with
``resnapshot = "full"`` the fold of any delivery of a re-snapshotted table equals the table as
Postgres holds it, also when deletes before the second snapshot were never delivered; and an
incremental snapshot's read never replaces a newer change."""

from __future__ import annotations

import pytest

from cdc.records import Record
from lakehouse.declare import cdc_table
from lakehouse_core.errors import ConfigError
from lakehouse_core.loader import config_from_toml
from silver.reference import FoldSpec, fold
from silver.verify import fold_spec
from tests.draws import draw_examples, example_count, property_seed
from tests.helpers import bronze_record, pg_envelope, pg_key
from tests.resnapshots import TOPIC, resnapshot_scenarios

pytestmark = pytest.mark.unit

FULL = FoldSpec(resnapshot="full")


def _names(records: list[Record], spec: FoldSpec) -> dict[int, str]:
    result = fold([bronze_record(r) for r in records], spec)
    assert not result.quarantined
    return {key[0]: row["name"] for key, row in result.rows.items()}


def test_fold_converges_to_the_source_under_any_delivery() -> None:
    seed = property_seed("RESNAPSHOT_SEED")
    scenarios = draw_examples(resnapshot_scenarios(), seed, example_count(400))
    lost_deletes = diverged = 0
    for index, scenario in enumerate(scenarios):
        records = [record for _, record in scenario.records(index)]
        assert _names(records, FULL) == scenario.expected(index), (
            f"RESNAPSHOT_SEED={seed}\n{scenario.describe(index)}"
        )
        if scenario.loses_a_delete:
            lost_deletes += 1
            diverged += _names(records, FoldSpec()) != scenario.expected(index)
    # The rule matters: without it a lost delete's key stays.
    assert lost_deletes >= 40 and diverged >= 10, (lost_deletes, diverged)


def _read(key: int, seq: tuple[int | None, int], name: str, marker: str, offset: int) -> Record:
    value = pg_envelope("r", seq, after={"id": key, "name": name, "notes": None})
    value["payload"]["source"]["snapshot"] = marker
    return Record(TOPIC, 0, offset, 0, pg_key(key), value)


def _change(op: str, key: int, seq: tuple[int, int], name: str | None, offset: int) -> Record:
    image = {"id": key, "name": name, "notes": None}
    value = pg_envelope(op, seq, **({"before": image} if op == "d" else {"after": image}))
    return Record(TOPIC, 0, offset, 0, pg_key(key), value)


#: The hand case of docs/silver-semantics.md, "Re-snapshots": keys 1-3 in the initial
#: snapshot; key 2 deleted and key 4 inserted while the connector's offsets were lost (neither
#: delivered); a blocking snapshot at LSN 300 reads keys 1, 3 and 4 (its end marker arrives
#: first); key 5 is inserted after it and delivered before its reads.
HAND_CASE = [
    _read(4, (250, 300), "four", "last_in_data_collection", 0),
    _change("c", 5, (250, 310), "five", 1),
    _read(1, (None, 100), "one", "first", 2),
    _read(2, (None, 100), "two", "true", 3),
    _read(3, (None, 100), "three", "last", 4),
    _read(1, (250, 300), "one", "first", 5),
    _read(3, (250, 300), "three", "true", 6),
]


def test_hand_case() -> None:
    assert _names(HAND_CASE, FULL) == {1: "one", 3: "three", 4: "four", 5: "five"}
    assert _names(HAND_CASE, FoldSpec()) == {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


def test_incremental_read_never_replaces_a_newer_change() -> None:
    """Delivered after the update it predates, an incremental read changes nothing; the full
    rule leaves incremental reads alone (they end no snapshot)."""
    update = _change("u", 1, (400, 410), "new", 0)
    read = _read(1, (300, 305), "old", "incremental", 1)
    later = _read(1, (420, 425), "new", "incremental", 2)
    for spec in (FoldSpec(), FULL):
        assert _names([update, read], spec) == {1: "new"}
        assert _names([update, later, read], spec) == {1: "new"}


TOML = '[[tables]]\nname = "items"\ntopic = "pg.public.items"\n'


def test_the_setting_in_toml_python_and_verify() -> None:
    config = config_from_toml(TOML + 'resnapshot = "full"\n')
    (spec,) = config.tables
    assert spec.resnapshot == "full"
    assert config_from_toml(config.to_toml()) == config
    assert cdc_table("items", topic="pg.public.items", resnapshot="full") == spec
    assert fold_spec(spec, None).resnapshot == "full"  # what verify folds with
    assert config_from_toml(TOML).tables[0].resnapshot == "upsert"


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            'resnapshot = "always"',
            r"^Invalid resnapshot 'always' for table 'items'\. Must be one of upsert, full\.$",
        ),
        (
            'resnapshot = "full"\nformat = "events"\nkeys = ["id"]\nsequence_by = ["ts"]',
            r"^Table 'items': resnapshot = \"full\" needs Debezium's snapshot markers; an events "
            r"table has none \(remove the setting or set format = \"debezium\"\)\.$",
        ),
    ],
)
def test_a_wrong_setting_is_one_line(setting: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_toml(TOML + setting + "\n")
