"""Pipelines declared in Python (:mod:`lakehouse.declare`) are the pipelines their TOML
declares: each constructor gives the spec the same TOML entry gives, a wrong declaration raises
the ConfigError line its TOML raises, and ``PipelineConfig.to_toml`` reads back
(``config_from_toml``, ``load_config``) to an equal config for randomly generated pipelines.
Pure Python: no Spark."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakehouse
from lakehouse import (
    Lakehouse,
    absent,
    alert,
    catalog,
    cdc_table,
    config_from_toml,
    count_window,
    events_table,
    gold_table,
    hopping,
    join,
    match_measure,
    measure,
    pattern,
    pipeline_config,
    quality,
    retention,
    session,
    sliding,
    sql_model,
    step,
    stream_join,
    top_n,
    tumbling,
)
from lakehouse_core.config import PipelineConfig, load_config
from lakehouse_core.errors import ConfigError

pytestmark = pytest.mark.unit


def from_toml(text: str) -> PipelineConfig:
    return config_from_toml(textwrap.dedent(text))


# --- each constructor gives what its TOML gives ---------------------------------------------

SHOP_TOML = """
[[tables]]
name = "orders"
topic = "shop.public.orders"
keys = ["id"]
sequence_by = ["lsn"]
system_sequence_by = "seq2"
stored_as_scd_type = 2
track_history_column_list = ["status", "total"]
apply_as_deletes = "status = 'deleted'"
apply_as_truncates = "op_kind = 'T'"
except_column_list = ["secret"]
ignore_null_updates_column_list = ["notes"]
tombstone_retention_days = 3
on_incompatible_type = "fail"
type_widening = "in_place"
deletion_vectors = true

[[tables]]
name = "clickstream"
topic = "shop.clickstream"
format = "events"
keys = ["event_id"]
sequence_by = ["ts"]
schema = "event_id string, user_id bigint, page string, ts timestamp"
column_list = ["user_id", "page", "ts"]

[[tables]]
name = "customers"
topic = "shop.public.customers"
stored_as_scd_type = 2

[[gold]]
name = "revenue"
source = "orders"
event_time = "created_at"
group_by = ["tier"]
filter = "total > 0"
watermark_delay = "5 minutes"
window = { kind = "tumbling", size = "1 minute" }
columns = { total_eur = "total * 0.9" }
join = { entity = "customers", on = { customer_id = "id" }, columns = ["tier"], prefix = "c_" }
top_n = { n = 3, order_by = "revenue DESC, tier", partition_by = ["tier"] }
measures = [
  { name = "revenue", fn = "sum", column = "total_eur" },
  { name = "orders", fn = "count" },
  { name = "big", fn = "count", filter = "total > 100" },
  { name = "mean", fn = "avg", column = "total" },
  { name = "least", fn = "min", column = "total" },
  { name = "most", fn = "max", column = "total" },
  { name = "buyers", fn = "count_distinct", column = "customer_id" },
  { name = "p90", fn = "approx_percentile", column = "total", percentile = 0.9 },
  { name = "span", fn = "span_seconds", column = "created_at" },
  { name = "latest", fn = "last", column = "status" },
  { name = "top_buyer", fn = "max_by", column = "customer_id", by = "total" },
  { name = "low_buyer", fn = "min_by", column = "customer_id", by = "total" },
]

[[gold]]
name = "hops"
source = "orders"
event_time = "created_at"
window = { kind = "hopping", size = "10 minutes", slide = "5 minutes" }
measures = [{ name = "orders", fn = "count" }]

[[gold]]
name = "sessions"
source = "clickstream"
event_time = "ts"
group_by = ["user_id"]
measures = [{ name = "events", fn = "count" }]
[gold.window]
kind = "session"
gap = "30 minutes"
start_as = "session_start"
end_as = "session_end"

[[gold]]
name = "recent"
source = "clickstream"
event_time = "ts"
group_by = ["user_id"]
window = { kind = "sliding", lookback = "1 hour" }
measures = [{ name = "events", fn = "count" }]

[[gold]]
name = "every_ten"
source = "clickstream"
event_time = "ts"
group_by = ["user_id"]
window = { kind = "count", count = 10 }
measures = [{ name = "pages", fn = "count_distinct", column = "page" }]

[[gold]]
name = "orders_with_clicks"
source = "orders"
event_time = "created_at"
group_by = ["customer_id"]
measures = [{ name = "clicks", fn = "count" }]
[gold.stream_join]
source = "clickstream"
on = { customer_id = "user_id" }
event_time = "ts"
within = "30 minutes"

[[patterns]]
name = "abandoned_carts"
source = "clickstream"
event_time = "ts"
partition_by = ["user_id"]
within = "30 minutes"
after_match = "skip_to_next"
watermark_delay = "2 minutes"
alert = true
steps = [
  { name = "view", condition = "page = 'cart'", times = "1+" },
  { name = "cart", condition = "page = view.page" },
]
absent = { condition = "page = 'checkout'", within = "30 minutes" }
measures = [
  { name = "product_page", fn = "first", step = "cart", column = "page" },
  { name = "views", fn = "count", step = "view" },
]

[[alerts]]
name = "big_orders"
source = "orders"
key = "customer_id"
value = "total"
event_time = "created_at"
method = "zscore"
threshold = 5.0
min_history = 3
row_key = "order_id"

[[models]]
name = "per_tier"
sql = "SELECT tier, sum(revenue) AS revenue FROM gold.revenue GROUP BY tier"
key = ["tier"]

[quality]
suites = "suites"
packaged_suites = true
validate_every = "1 hour"

[quality.actions]
"silver.orders.total_not_negative" = "fail"

[catalog]
name = "main"
schema_prefix = "shop_"

[maintenance]
vacuum_retention_hours = 24
bronze_retention_days = 30
"""


def shop_in_python() -> PipelineConfig:
    return pipeline_config(
        tables=[
            cdc_table(
                "orders",
                topic="shop.public.orders",
                keys=["id"],
                sequence_by="lsn",
                system_sequence_by="seq2",
                stored_as_scd_type=2,
                track_history_column_list=["status", "total"],
                apply_as_deletes="status = 'deleted'",
                apply_as_truncates="op_kind = 'T'",
                except_column_list=["secret"],
                ignore_null_updates_column_list=["notes"],
                tombstone_retention_days=3,
                on_incompatible_type="fail",
                type_widening="in_place",
                deletion_vectors=True,
            ),
            events_table(
                "clickstream",
                topic="shop.clickstream",
                keys="event_id",
                sequence_by=["ts"],
                schema="event_id string, user_id bigint, page string, ts timestamp",
                column_list=("user_id", "page", "ts"),
            ),
            cdc_table("customers", topic="shop.public.customers", stored_as_scd_type="2"),
        ],
        gold=[
            gold_table(
                "revenue",
                source="orders",
                event_time="created_at",
                group_by=["tier"],
                filter="total > 0",
                watermark_delay="5 minutes",
                window=tumbling("1 minute"),
                columns={"total_eur": "total * 0.9"},
                join=join("customers", on={"customer_id": "id"}, columns=["tier"], prefix="c_"),
                top_n=top_n(3, order_by="revenue DESC, tier", partition_by=["tier"]),
                measures=[
                    measure.sum("total_eur", name="revenue"),
                    measure.count(name="orders"),
                    measure.count(name="big", filter="total > 100"),
                    measure.avg("total", name="mean"),
                    measure.min("total", name="least"),
                    measure.max("total", name="most"),
                    measure.count_distinct("customer_id", name="buyers"),
                    measure.approx_percentile("total", 0.9, name="p90"),
                    measure.span_seconds("created_at", name="span"),
                    measure.last("status", name="latest"),
                    measure.max_by("customer_id", "total", name="top_buyer"),
                    measure.min_by("customer_id", by="total", name="low_buyer"),
                ],
            ),
            gold_table(
                "hops",
                source="orders",
                event_time="created_at",
                window=hopping("10 minutes", "5 minutes"),
                measures=[measure.count(name="orders")],
            ),
            gold_table(
                "sessions",
                source="clickstream",
                event_time="ts",
                group_by="user_id",
                window=session("30 minutes", start_as="session_start", end_as="session_end"),
                measures=[measure.count(name="events")],
            ),
            gold_table(
                "recent",
                source="clickstream",
                event_time="ts",
                group_by=["user_id"],
                window=sliding("1 hour"),
                measures=[measure.count(name="events")],
            ),
            gold_table(
                "every_ten",
                source="clickstream",
                event_time="ts",
                group_by=["user_id"],
                window=count_window(10),
                measures=[measure.count_distinct("page", name="pages")],
            ),
            gold_table(
                "orders_with_clicks",
                source="orders",
                event_time="created_at",
                group_by=["customer_id"],
                stream_join=stream_join(
                    "clickstream",
                    on={"customer_id": "user_id"},
                    event_time="ts",
                    within="30 minutes",
                ),
                measures=[measure.count(name="clicks")],
            ),
        ],
        patterns=[
            pattern(
                "abandoned_carts",
                source="clickstream",
                event_time="ts",
                partition_by=["user_id"],
                within="30 minutes",
                after_match="skip_to_next",
                watermark_delay="2 minutes",
                alert=True,
                steps=[step("view", "page = 'cart'", times="1+"), step("cart", "page = view.page")],
                absent=absent("page = 'checkout'", within="30 minutes"),
                measures=[
                    match_measure.first("page", step="cart", name="product_page"),
                    match_measure.count(step="view", name="views"),
                ],
            )
        ],
        alerts=[
            alert(
                "big_orders",
                source="orders",
                key="customer_id",
                value="total",
                event_time="created_at",
                method="zscore",
                threshold=5.0,
                min_history=3,
                row_key="order_id",
            )
        ],
        models=[
            sql_model(
                "per_tier",
                sql="SELECT tier, sum(revenue) AS revenue FROM gold.revenue GROUP BY tier",
                key="tier",
            )
        ],
        quality=quality(
            suites="suites",
            packaged_suites=True,
            validate_every="1 hour",
            actions={"silver.orders.total_not_negative": "fail"},
        ),
        catalog=catalog("main", schema_prefix="shop_"),
        maintenance=retention(vacuum_retention_hours=24, bronze_retention_days=30),
    )


def test_every_declaration_equals_its_toml() -> None:
    declared = shop_in_python()
    assert declared == from_toml(SHOP_TOML)
    assert config_from_toml(declared.to_toml()) == declared
    # The join of an SCD type 2 Debezium entity was decided as of event time, as in TOML.
    revenue = declared.gold_declarations[0]
    assert revenue.join is not None and revenue.join.as_of == "event_time"


@pytest.mark.parametrize(
    ("declared", "entry"),
    [
        (cdc_table("orders", topic="t"), '[[tables]]\nname = "orders"\ntopic = "t"'),
        (
            events_table("c", topic="t", keys=["id"], sequence_by="ts"),
            '[[tables]]\nname = "c"\ntopic = "t"\nformat = "events"\nkeys = "id"\n'
            'sequence_by = "ts"',
        ),
        (
            alert("a", source="s", key="k", value="v", event_time="t"),
            '[[alerts]]\nname = "a"\nsource = "s"\nkey = "k"\nvalue = "v"\nevent_time = "t"',
        ),
        (
            sql_model("m", sql="SELECT id FROM silver.x"),
            '[[models]]\nname = "m"\nsql = "SELECT id FROM silver.x"',
        ),
    ],
)
def test_a_single_declaration_is_the_spec_of_its_entry(declared: Any, entry: str) -> None:
    config = from_toml(entry)
    found = (*config.tables, *config.alerts, *config.models)
    assert found == (declared,)


def test_measures_take_a_default_name_and_windows_their_settings() -> None:
    assert measure.sum("total").name == "sum_total"
    assert measure.count().name == "count"
    assert match_measure.count().name == "count"
    assert (
        tumbling("1 minute")
        == from_toml(
            '[[gold]]\nname = "g"\nsource = "s"\nevent_time = "t"\n'
            'window = { kind = "tumbling", size = "1 minute" }\n'
            'measures = [{ name = "n", fn = "count" }]'
        )
        .gold_declarations[0]
        .window
    )


# --- a wrong declaration raises the line its TOML raises ------------------------------------

G = '[[gold]]\nname = "g"\nsource = "s"\nevent_time = "t"\n'
M = 'measures = [{ name = "n", fn = "count" }]\n'


def _gold(**settings: Any) -> Callable[[], object]:
    base: dict[str, Any] = {
        "source": "s",
        "event_time": "t",
        "window": tumbling("1 minute"),
        "measures": [measure.count(name="n")],
    }
    return lambda: gold_table("g", **(base | settings))


MISTAKES: list[tuple[str, Callable[[], object], str]] = [
    ("no topic", lambda: cdc_table("orders"), '[[tables]]\nname = "orders"'),
    (
        "events without keys",
        lambda: events_table("c", topic="t", sequence_by="ts"),
        '[[tables]]\nname = "c"\ntopic = "t"\nformat = "events"\nsequence_by = "ts"',
    ),
    (
        "bad scd type",
        lambda: cdc_table("o", topic="t", stored_as_scd_type=3),
        '[[tables]]\nname = "o"\ntopic = "t"\nstored_as_scd_type = 3',
    ),
    (
        "both column lists",
        lambda: cdc_table("o", topic="t", column_list=["a"], except_column_list=["b"]),
        '[[tables]]\nname = "o"\ntopic = "t"\ncolumn_list = ["a"]\nexcept_column_list = ["b"]',
    ),
    (
        "keys not a list of strings",
        lambda: cdc_table("o", topic="t", keys=[1]),  # type: ignore[list-item]
        '[[tables]]\nname = "o"\ntopic = "t"\nkeys = [1]',
    ),
    (
        "bad condition",
        lambda: cdc_table("o", topic="t", apply_as_deletes="reflect('x')"),
        '[[tables]]\nname = "o"\ntopic = "t"\napply_as_deletes = "reflect(\'x\')"',
    ),
    (
        "bad duration",
        _gold(window=tumbling("1 fortnight")),
        G + 'window = { kind = "tumbling", size = "1 fortnight" }\n' + M,
    ),
    (
        "slide above size",
        _gold(window=hopping("1 minute", "5 minutes")),
        G + 'window = { kind = "hopping", size = "1 minute", slide = "5 minutes" }\n' + M,
    ),
    (
        "count window of 0",
        lambda: count_window(0),
        G + 'window = { kind = "count", count = 0 }\n' + M,
    ),
    (
        "unknown measure",
        lambda: measure.median,
        G + 'window = { kind = "tumbling", size = "1 minute" }\n'
        'measures = [{ name = "median", fn = "median" }]\n',
    ),
    (
        "percentile above 1",
        lambda: measure.approx_percentile("x", 2, name="p"),
        G + 'window = { kind = "tumbling", size = "1 minute" }\n'
        'measures = [{ name = "p", fn = "approx_percentile", column = "x", percentile = 2 }]\n',
    ),
    (
        "no window",
        _gold(window=None),
        G + M,
    ),
    (
        "no measures",
        _gold(measures=[]),
        G + 'window = { kind = "tumbling", size = "1 minute" }\nmeasures = []\n',
    ),
    (
        "top_n of a session window",
        _gold(window=session("5 minutes"), top_n=top_n(1, order_by="n DESC")),
        G + 'window = { kind = "session", gap = "5 minutes" }\n'
        'top_n = { n = 1, order_by = "n DESC" }\n' + M,
    ),
    (
        "self join",
        _gold(join=join("s", on=["id"], columns=["x"])),
        G + 'window = { kind = "tumbling", size = "1 minute" }\n'
        'join = { entity = "s", on = ["id"], columns = ["x"] }\n' + M,
    ),
    (
        "bad order_by",
        lambda: top_n(1, order_by="n SIDEWAYS"),
        G + 'window = { kind = "tumbling", size = "1 minute" }\n'
        'top_n = { n = 1, order_by = "n SIDEWAYS" }\n' + M,
    ),
    (
        "pattern without steps",
        lambda: pattern("p", source="s", event_time="t", steps=[], within="1 minute"),
        '[[patterns]]\nname = "p"\nsource = "s"\nevent_time = "t"\nsteps = []\nwithin = "1 minute"',
    ),
    (
        "times of 0",
        lambda: step("a", times=0),
        '[[patterns]]\nname = "p"\nsource = "s"\nevent_time = "t"\nwithin = "1 minute"\n'
        'steps = [{ name = "a", times = 0 }]',
    ),
    (
        "only optional steps",
        lambda: pattern(
            "p", source="s", event_time="t", within="1 minute", steps=[step("a", times="?")]
        ),
        '[[patterns]]\nname = "p"\nsource = "s"\nevent_time = "t"\nwithin = "1 minute"\n'
        'steps = [{ name = "a", times = "?" }]',
    ),
    (
        "step contiguity",
        lambda: step("a", contiguity="next"),
        '[[patterns]]\nname = "p"\nsource = "s"\nevent_time = "t"\nwithin = "1 minute"\n'
        'steps = [{ name = "a", contiguity = "next" }]',
    ),
    (
        "pattern contiguity",
        lambda: pattern(
            "p", source="s", event_time="t", within="1 minute", steps=[step("a")], contiguity="x"
        ),
        '[[patterns]]\nname = "p"\nsource = "s"\nevent_time = "t"\nwithin = "1 minute"\n'
        'steps = [{ name = "a" }]\ncontiguity = "x"',
    ),
    (
        "pattern measure without a column",
        lambda: match_measure.first(None, name="f"),  # type: ignore[arg-type]
        '[[patterns]]\nname = "p"\nsource = "s"\nevent_time = "t"\nwithin = "1 minute"\n'
        'steps = [{ name = "a" }]\nmeasures = [{ name = "f", fn = "first" }]',
    ),
    (
        "alert threshold 0",
        lambda: alert("a", source="s", key="k", value="v", event_time="t", threshold=0),
        '[[alerts]]\nname = "a"\nsource = "s"\nkey = "k"\nvalue = "v"\nevent_time = "t"\n'
        "threshold = 0",
    ),
    (
        "alert without a key",
        lambda: alert("a", source="s", value="v", event_time="t"),
        '[[alerts]]\nname = "a"\nsource = "s"\nvalue = "v"\nevent_time = "t"',
    ),
    (
        "model that writes",
        lambda: sql_model("m", sql="DELETE FROM silver.orders"),
        '[[models]]\nname = "m"\nsql = "DELETE FROM silver.orders"',
    ),
    (
        "unknown quality action",
        lambda: quality(actions={"silver.orders.x": "explode"}),
        '[quality.actions]\n"silver.orders.x" = "explode"',
    ),
    ("bad catalog name", lambda: catalog("a b"), '[catalog]\nname = "a b"'),
    (
        "negative vacuum retention",
        lambda: retention(vacuum_retention_hours=-1),
        "[maintenance]\nvacuum_retention_hours = -1",
    ),
    (
        "repeated gold names",
        lambda: pipeline_config(gold=[_gold()(), _gold()()]),
        G
        + 'window = { kind = "tumbling", size = "1 minute" }\n'
        + M
        + "\n"
        + G
        + 'window = { kind = "tumbling", size = "1 minute" }\n'
        + M,
    ),
    (
        "join as of event time of an entity without history",
        lambda: pipeline_config(
            gold=[_gold(join=join("c", on=["id"], columns=["x"], as_of="event_time"))()]
        ),
        G + 'window = { kind = "tumbling", size = "1 minute" }\n'
        'join = { entity = "c", on = ["id"], columns = ["x"], as_of = "event_time" }\n' + M,
    ),
    (
        "repeated topic",
        lambda: pipeline_config(tables=[cdc_table("a", topic="t"), cdc_table("b", topic="t")]),
        '[[tables]]\nname = "a"\ntopic = "t"\n[[tables]]\nname = "b"\ntopic = "t"',
    ),
]


@pytest.mark.parametrize(
    ("declare", "toml"), [(d, t) for _, d, t in MISTAKES], ids=[n for n, _, _ in MISTAKES]
)
def test_a_wrong_declaration_raises_what_its_toml_raises(
    declare: Callable[[], object], toml: str
) -> None:
    with pytest.raises(ConfigError) as from_file:
        from_toml(toml)
    with pytest.raises(ConfigError) as from_python:
        declare()
    assert str(from_python.value) == str(from_file.value)
    assert "\n" not in str(from_python.value)


@pytest.mark.parametrize(
    ("declare", "message"),
    [
        (
            lambda: pipeline_config(tables=[tumbling("1 minute")]),
            r"^tables= takes cdc_table\(\.\.\.\)",
        ),
        (lambda: pipeline_config(gold=measure.count()), r"^gold= takes a list of gold_table"),
        (lambda: pipeline_config(quality=catalog()), r"^quality= takes quality\(\.\.\.\), not "),
    ],
)
def test_a_declaration_of_the_wrong_kind_is_named(
    declare: Callable[[], object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        declare()


# --- Lakehouse(...) takes declarations ------------------------------------------------------


def test_lakehouse_takes_declarations_and_shows_them_as_toml(tmp_path: Path) -> None:
    tables = [cdc_table("orders", topic="shop.public.orders", stored_as_scd_type=2)]
    gold = [
        gold_table(
            "revenue",
            source="orders",
            event_time="created_at",
            window=tumbling("1 minute"),
            measures=[measure.sum("total", name="revenue")],
        )
    ]
    lh = Lakehouse(tmp_path / "wh", tables=tables, gold=gold)
    assert lh.config == pipeline_config(tables=tables, gold=gold)
    assert lh.config.gold_declarations == tuple(gold)
    assert config_from_toml(lh.config.to_toml()) == lh.config
    assert lh._spark is None  # declaring starts no Spark
    # Declarations alone: exactly what is declared, no demo gold tables.
    assert Lakehouse(tmp_path / "wh", tables=tables).config.gold_declarations == ()
    with pytest.raises(ConfigError, match=r"^Lakehouse got both config= and declarations "):
        Lakehouse(tmp_path / "wh", lh.config, tables=tables)


def test_the_package_exports_the_declarations_and_spec_types() -> None:
    for name in ("cdc_table", "gold_table", "measure", "TableSpec", "GoldTable", "Window"):
        assert name in lakehouse.__all__
    assert lakehouse.PipelineConfig is PipelineConfig


def test_a_written_config_file_loads_back(tmp_path: Path) -> None:
    declared = shop_in_python()
    path = tmp_path / "pipeline.toml"
    path.write_text(declared.to_toml(), encoding="utf-8")
    # The suites directory, declared relative to the working directory, is read relative to
    # the file's directory.
    suites = str(tmp_path / "suites")
    assert load_config(path) == replace(declared, quality=replace(declared.quality, suites=suites))


# --- random pipelines round-trip through TOML -----------------------------------------------

TABLE_NAMES = ("orders", "value", "select", "t_1", "Clicks", "order", "from")
COLUMNS = ("id", "amount", "user_id", "page", "value", "group")
CONDITIONS = (
    "amount > 10",
    "page = 'it\\'s'",
    "amount IS NULL OR amount BETWEEN 1 AND 5",
    "page LIKE 'a%' AND user_id IN (1, 2)",
)
UNITS = ("second", "seconds", "minute", "minutes", "hour", "hours", "day", "days")
durations = st.builds(lambda n, unit: f"{n} {unit}", st.integers(1, 90), st.sampled_from(UNITS))
columns = st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=3, unique=True)
maybe = st.booleans()


@st.composite
def tables(draw: st.DrawFn) -> list[Any]:
    names = draw(st.lists(st.sampled_from(TABLE_NAMES), max_size=4, unique=True))
    made = []
    for name in names:
        settings: dict[str, Any] = {"topic": f"topic.{name}"}
        events = draw(maybe)
        keys = draw(columns)
        if events or draw(maybe):
            settings["keys"] = keys if draw(maybe) else keys[0]
            settings["sequence_by"] = draw(st.sampled_from(("ts", ["ts", "lsn"])))
            if draw(maybe):
                settings["system_sequence_by"] = "seq2"
        if events and draw(maybe):
            settings["schema"] = "id bigint, amount double, page string, ts timestamp"
        if draw(maybe):
            settings["stored_as_scd_type"] = draw(st.sampled_from((1, 2, "2")))
            if settings["stored_as_scd_type"] != 1 and draw(maybe):
                kind = draw(st.sampled_from(("", "except_")))
                settings[f"track_history_{kind}column_list"] = draw(columns)
        for condition in ("apply_as_deletes", "apply_as_truncates"):
            if draw(maybe):
                settings[condition] = draw(st.sampled_from(CONDITIONS))
        listed = draw(st.sampled_from(("", "column_list", "except_column_list")))
        kept = [c for c in draw(columns) if c not in keys or listed == "column_list"]
        if listed and kept:
            settings[listed] = kept
        partial = draw(st.sampled_from(("", "column_list", "except_column_list")))
        if partial:
            settings[f"ignore_null_updates_{partial}"] = draw(columns)
        elif draw(maybe):
            settings["ignore_null_updates"] = True
        if draw(maybe):
            settings["tombstone_retention_days"] = draw(st.integers(0, 30))
            settings["on_incompatible_type"] = draw(st.sampled_from(("fail", "quarantine")))
            settings["type_widening"] = draw(st.sampled_from(("in_place", "rewrite")))
            settings["deletion_vectors"] = draw(maybe)
        if events:
            made.append(events_table(name, **settings))
        else:
            made.append(cdc_table(name, **settings))
    return made


def _measures(draw: st.DrawFn, filters: bool) -> list[Any]:
    made = []
    for index, kind in enumerate(draw(st.lists(st.integers(0, 11), min_size=1, max_size=4))):
        name = f"m_{index}"
        where = draw(st.sampled_from(CONDITIONS)) if filters and draw(maybe) else None
        column = draw(st.sampled_from(COLUMNS))
        percentile = draw(st.sampled_from((0, 0.25, 0.5, 1)))
        fn, args = [
            ("count", ()),
            ("count", (column,)),
            ("sum", (column,)),
            ("avg", (column,)),
            ("min", (column,)),
            ("max", (column,)),
            ("count_distinct", (column,)),
            ("approx_percentile", (column, percentile)),
            ("span_seconds", ("ts",)),
            ("last", (column,)),
            ("max_by", (column, "amount")),
            ("min_by", (column, "ts")),
        ][kind]
        made.append(getattr(measure, fn)(*args, name=name, filter=where))
    return made


@st.composite
def gold_tables(draw: st.DrawFn) -> list[Any]:
    names = draw(st.lists(st.sampled_from(("revenue", "value", "select", "g_1")), unique=True))
    made = []
    for name in names:
        source = draw(st.sampled_from(TABLE_NAMES))
        group_by = draw(st.lists(st.sampled_from(("user_id", "page", "tier")), unique=True))
        settings: dict[str, Any] = {"source": source, "event_time": "ts", "group_by": group_by}
        if draw(maybe):
            settings["watermark_delay"] = draw(durations)
        kind = draw(st.sampled_from(("tumbling", "hopping", "session", "sliding", "count", "row")))
        if kind == "row":
            other = draw(st.sampled_from([t for t in TABLE_NAMES if t != source]))
            settings["group_by"] = ["user_id", *(c for c in group_by if c != "user_id")]
            settings["stream_join"] = stream_join(
                other, on={"user_id": "uid"}, event_time="ts", within=draw(durations)
            )
            settings["measures"] = _measures(draw, filters=False)
            made.append(gold_table(name, **settings))
            continue
        bounds = {}
        if draw(maybe):
            bounds = {"start_as": "starts", "end_as": "ends"}
        if kind == "hopping":
            slide = draw(st.integers(1, 60))
            size = slide + draw(st.integers(0, 60))
            window = hopping(f"{size} minutes", f"{slide} minutes", **bounds)
        elif kind == "count":
            window = count_window(draw(st.integers(1, 1000)), **bounds)
        else:
            made_by = {"tumbling": tumbling, "session": session, "sliding": sliding}[kind]
            window = made_by(draw(durations), **bounds)
        settings["window"] = window
        settings["measures"] = _measures(draw, filters=True)
        if draw(maybe):
            settings["filter"] = draw(st.sampled_from(CONDITIONS))
        if draw(maybe):
            settings["columns"] = {"doubled": "amount * 2", "hour_of": "hour(ts)"}
        if draw(maybe):
            entity = draw(st.sampled_from([t for t in TABLE_NAMES if t != source]))
            settings["join"] = join(
                entity,
                on=draw(st.sampled_from((["id"], {"customer_id": "id"}))),
                columns=["tier_of", "name"],
                prefix=draw(st.sampled_from(("", "c_"))),
                as_of=draw(st.sampled_from((None, "current"))),
            )
        if kind in ("tumbling", "hopping") and draw(maybe):
            settings["top_n"] = top_n(
                draw(st.integers(1, 5)),
                order_by=draw(st.sampled_from(("m_0 DESC", "m_0, m_0 DESC", "m_0 ASC"))),
                partition_by=group_by[:1],
            )
        made.append(gold_table(name, **settings))
    return made


@st.composite
def patterns(draw: st.DrawFn) -> list[Any]:
    names = draw(st.lists(st.sampled_from(("p_1", "p_2", "Carts")), unique=True))
    made = []
    for name in names:
        count = draw(st.integers(1, 3))
        steps = []
        for index in range(count):
            condition = draw(st.sampled_from((*CONDITIONS, "TRUE")))
            if index and draw(maybe):
                condition = f"amount > s_{index - 1}.amount"
            times = draw(st.sampled_from((1, 2, "3", "1+", "2..4", "?", "*")))
            contiguity = draw(st.sampled_from((None, None, "strict", "relaxed")))
            if index == count - 1 and all(s.least == 0 for s in steps):
                times = 1  # one step at least is required
            steps.append(step(f"s_{index}", condition, times=times, contiguity=contiguity))
        settings: dict[str, Any] = {}
        if draw(maybe):
            settings["contiguity"] = "strict"
        if draw(maybe):
            settings["absent"] = absent(draw(st.sampled_from(CONDITIONS)), within=draw(durations))
        fns = ("first", "last", "count", "min", "max", "sum")
        settings["measures"] = [
            getattr(match_measure, fn)(
                draw(st.sampled_from(COLUMNS)),
                step=draw(st.sampled_from((None, *(s.name for s in steps)))),
                name=f"pm_{index}",
            )
            for index, fn in enumerate(draw(st.lists(st.sampled_from(fns), max_size=3)))
        ]
        if draw(maybe):
            settings["after_match"] = "skip_to_next"
            settings["watermark_delay"] = draw(durations)
            settings["alert"] = True
        made.append(
            pattern(
                name,
                source=draw(st.sampled_from(TABLE_NAMES)),
                event_time="ts",
                partition_by=draw(st.lists(st.sampled_from(("user_id", "page")), unique=True)),
                within=draw(durations),
                steps=steps,
                **settings,
            )
        )
    return made


alerts = st.lists(
    st.builds(
        lambda name, method, threshold, history: alert(
            name,
            source="orders",
            key="customer_id",
            value="total",
            event_time="created_at",
            method=method,
            threshold=threshold,
            min_history=history,
            row_key="order_id",
        ),
        st.sampled_from(("a_1", "big", "value")),
        st.sampled_from(("mad", "zscore", "math:fsum")),
        st.one_of(st.integers(1, 9), st.floats(0.01, 100, allow_nan=False)),
        st.integers(2, 50),
    ),
    max_size=2,
    unique_by=lambda a: a.name,
)
models = st.lists(
    st.sampled_from(
        (
            sql_model(
                "m_sum",
                sql="SELECT id, sum(amount) AS total\nFROM silver.orders\nGROUP BY id",
                key="id",
            ),
            sql_model("m_all", sql="SELECT * FROM silver.value WHERE page <> 'it''s'"),
            sql_model("m_two", sql="SELECT a.id FROM gold.m_all AS a", key=["id"]),
        )
    ),
    max_size=3,
    unique_by=lambda m: m.name,
)
qualities = st.builds(
    quality,
    suites=st.sampled_from((None, "suites", "s3://bucket/suites")),
    packaged_suites=maybe,
    actions=st.dictionaries(
        st.sampled_from(("silver.orders.x", "gold.value.not_null", "bronze.select.y")),
        st.sampled_from(("warn", "drop", "fail")),
    ),
    validate_every=st.one_of(st.none(), durations),
)
catalogs = st.builds(
    catalog, st.sampled_from((None, "main", "select")), schema_prefix=st.sampled_from(("", "p_"))
)
maintenances = st.builds(
    retention,
    vacuum_retention_hours=st.integers(0, 500),
    bronze_retention_days=st.one_of(st.none(), st.integers(1, 100)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tables(),
    gold_tables(),
    patterns(),
    alerts,
    models,
    qualities,
    catalogs,
    maintenances,
)
def test_a_random_pipeline_reads_back_from_its_toml(
    tables: list[Any],
    gold: list[Any],
    patterns: list[Any],
    alerts: list[Any],
    models: list[Any],
    quality: Any,
    catalog: Any,
    maintenance: Any,
) -> None:
    if any(m.name == "m_two" for m in models) and all(m.name != "m_all" for m in models):
        models = [m for m in models if m.name != "m_two"]  # it reads gold.m_all
    declared = pipeline_config(
        tables=tables,
        gold=gold,
        patterns=patterns,
        alerts=alerts,
        models=models,
        quality=quality,
        catalog=catalog,
        maintenance=maintenance,
    )
    text = declared.to_toml()
    assert config_from_toml(text) == declared, text
    assert config_from_toml(text).to_toml() == text
