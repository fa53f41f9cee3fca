"""Gold declarations: ``[[gold]]`` entries and the Python dataclasses, validated at load."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from lakehouse_core.config import load_config
from lakehouse_core.errors import ConfigError
from lakehouse_core.gold_tables import GoldTable, Join, Measure, StreamJoin, TopN, Window
from lakehouse_demo.settings import SHOP_CONFIG, ShopGoldSpec, shop_gold_tables
from tests.cli import run_cli

pytestmark = pytest.mark.unit

ENTRY = """
[[gold]]
name = "spend"
source = "orders"
event_time = "created_at"
group_by = ["customer_id"]
window = {{ {window} }}
measures = [{measures}]
{extra}
"""
GOOD_WINDOW = 'kind = "tumbling", size = "1 hour"'
GOOD_MEASURES = (
    '{ name = "revenue", fn = "sum", column = "total" }, { name = "orders", fn = "count" }'
)


def toml(
    tmp_path: Path, window: str = GOOD_WINDOW, measures: str = GOOD_MEASURES, extra: str = ""
) -> Path:
    path = tmp_path / "pipeline.toml"
    path.write_text(ENTRY.format(window=window, measures=measures, extra=extra), encoding="utf-8")
    return path


def test_a_gold_entry_is_the_same_declaration_as_from_python(tmp_path: Path) -> None:
    config = load_config(
        toml(tmp_path, extra='filter = "status <> \'cancelled\'"\nwatermark_delay = "5 minutes"')
    )
    assert config.gold_declarations == (
        GoldTable(
            name="spend",
            source="orders",
            event_time="created_at",
            window=Window("tumbling", size="1 hour"),
            measures=(Measure("revenue", "sum", "total"), Measure("orders", "count")),
            group_by=("customer_id",),
            filter="status <> 'cancelled'",
            watermark_delay="5 minutes",
        ),
    )
    assert config.gold_declarations[0].key == ("customer_id", "window_start")


def test_every_window_kind_loads(tmp_path: Path) -> None:
    for window in (
        'kind = "hopping", size = "1 hour", slide = "10 minutes"',
        'kind = "session", gap = "30 minutes"',
        'kind = "sliding", lookback = "1 hour"',
        'kind = "count", count = 10',
    ):
        (table,) = load_config(toml(tmp_path, window=window)).gold_declarations
        assert table.window.kind in window


def test_the_older_gold_table_is_refused_and_the_shop_tables_live_with_the_demo(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.toml"
    path.write_text('[gold]\nsession_gap = "5 minutes"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^The older \[gold\] table .*examples/shop\.toml"):
        load_config(path)
    tables = {t.name: t for t in shop_gold_tables(ShopGoldSpec(session_gap="5 minutes"))}
    assert set(tables) == {"revenue_per_minute", "user_sessions"}
    assert tables["user_sessions"].window == Window(
        "session", gap="5 minutes", start_as="session_start", end_as="session_end"
    )
    assert [t.name for t in SHOP_CONFIG.gold_declarations] == list(tables)
    assert ShopGoldSpec().session_gap == "30 minutes"
    assert load_config(None).gold_declarations == ()


@pytest.mark.parametrize(
    ("window", "measures", "extra", "message"),
    [
        (
            GOOD_WINDOW,
            '{ name = "m", fn = "median", column = "total" }',
            "",
            r"Unknown measure function 'median' for measure 'm'\. Must be one of count, sum, avg",
        ),
        (
            'kind = "tumbling"',
            GOOD_MEASURES,
            "",
            r"A tumbling window needs size: add size = '10 minutes'",
        ),
        (
            'kind = "hopping", size = "1 hour"',
            GOOD_MEASURES,
            "",
            r"A hopping window needs size and slide",
        ),
        (
            'kind = "session", gap = "5 minutes", size = "1 hour"',
            GOOD_MEASURES,
            "",
            r"A session window takes gap, not size: remove size",
        ),
        (
            'kind = "weekly"',
            GOOD_MEASURES,
            "",
            r"Unknown window kind 'weekly'\. Must be one of tumbling",
        ),
        ('kind = "count", count = 0', GOOD_MEASURES, "", r"Invalid window count 0"),
        (
            'kind = "hopping", size = "5 minutes", slide = "1 hour"',
            GOOD_MEASURES,
            "",
            r"slide \(1 hour\) must not exceed its size",
        ),
        (
            'kind = "tumbling", size = "1 fortnight"',
            GOOD_MEASURES,
            "",
            r"window\.size '1 fortnight' is not a duration",
        ),
        (GOOD_WINDOW, '{ name = "m", fn = "sum" }', "", r"Measure 'm' \(sum\) needs a column"),
        (
            GOOD_WINDOW,
            '{ name = "total; DROP", fn = "count" }',
            "",
            r"Invalid measure name 'total; DROP'",
        ),
        (
            GOOD_WINDOW,
            '{ name = "p", fn = "approx_percentile", column = "total", percentile = 2 }',
            "",
            r"Invalid percentile 2 for measure 'p'",
        ),
        (
            GOOD_WINDOW,
            '{ name = "window_start", fn = "count" }',
            "",
            r"would have the column\(s\) window_start twice",
        ),
        (
            GOOD_WINDOW,
            GOOD_MEASURES,
            'filter = "total > rand()"',
            r"Unsupported condition 'total > rand\(\)' for filter of gold table 'spend': "
            r"function 'rand' is not allowed",
        ),
        (
            GOOD_WINDOW,
            GOOD_MEASURES,
            'colour = "red"',
            r"Unknown setting\(s\) colour in \[\[gold\]\] 'spend'",
        ),
        (GOOD_WINDOW, "", "", r"Gold table 'spend' has no measures"),
        (
            GOOD_WINDOW,
            GOOD_MEASURES,
            'watermark_delay = "-5 minutes"',
            r"watermark_delay of gold table 'spend' is negative \('-5 minutes'\)",
        ),
        (
            GOOD_WINDOW,
            GOOD_MEASURES,
            'watermark_delay = "soon"',
            r"^Gold table 'spend': watermark_delay 'soon' is not a duration: ",
        ),
    ],
)
def test_one_clear_error_per_mistake(
    tmp_path: Path, window: str, measures: str, extra: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(toml(tmp_path, window, measures, extra))


def test_the_late_events_name_is_reserved() -> None:
    with pytest.raises(ConfigError, match=r"Gold table name 'late_events' is reserved"):
        GoldTable(
            "late_events",
            "orders",
            "created_at",
            Window("count", count=2),
            (Measure("n", "count"),),
        )


def test_unknown_column_is_named_once_the_source_schema_is_known() -> None:
    (table,) = (
        GoldTable(
            "spend",
            "orders",
            "created_at",
            Window("sliding", lookback="1 hour"),
            (Measure("revenue", "sum", "totl"),),
            group_by=("customer_id",),
        ),
    )
    table.check_columns(["customer_id", "created_at", "totl"])
    with pytest.raises(ConfigError) as raised:
        table.check_columns(["customer_id", "created_at", "total"])
    assert str(raised.value) == (
        "Gold table 'spend' reads column 'totl', which silver.orders does not have. "
        "Columns: created_at, customer_id, total."
    )


def test_a_bad_declaration_is_one_error_line(tmp_path: Path) -> None:
    config = toml(tmp_path, window='kind = "tumbling"')
    (tmp_path / "source").mkdir()
    result = run_cli(
        "run",
        "--source",
        f"files:{tmp_path / 'source'}",
        "--warehouse",
        tmp_path / "wh",
        "--once",
        "--config",
        config,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: A tumbling window needs size: add size = '10 minutes'."], errors


JOIN = 'join = { entity = "customers", on = { customer_id = "id" }, columns = ["tier"] }'


def test_a_join_loads_as_the_python_declaration(tmp_path: Path) -> None:
    (table,) = load_config(
        toml(tmp_path, extra=JOIN.replace("] }", '], prefix = "customer_" }'))
    ).gold_declarations
    expected = Join("customers", (("customer_id", "id"),), ("tier",), "customer_", "current")
    assert table.join == expected
    assert table.join.outputs == ("customer_tier",)
    listed = 'join = { entity = "customers", on = ["customer_id"], columns = ["tier", "name"] }'
    (same_names,) = load_config(toml(tmp_path, extra=listed)).gold_declarations
    assert same_names.join == Join(
        "customers", (("customer_id", "customer_id"),), ("tier", "name"), as_of="current"
    )


@pytest.mark.parametrize(
    ("join", "message"),
    [
        ('join = "customers"', r"'join' of \[\[gold\]\] 'spend' must be a table"),
        (
            'join = { entity = "customers", on = ["customer_id"] }',
            r"The join of \[\[gold\]\] 'spend' needs 'columns'",
        ),
        (
            'join = { entity = "customers", on = ["customer_id"], columns = ["tier"], as = "x" }',
            r"Unknown setting\(s\) as in the join of \[\[gold\]\] 'spend'",
        ),
        (
            'join = { entity = "customers", on = "customer_id", columns = ["tier"] }',
            r"'on' of the join of \[\[gold\]\] 'spend' must map each source column",
        ),
        (
            'join = { entity = "customers", on = [], columns = ["tier"] }',
            r"The join with 'customers' has no 'on' columns",
        ),
        (
            'join = { entity = "customers", on = ["customer_id"], columns = [] }',
            r"The join with 'customers' takes no columns",
        ),
        (
            'join = { entity = "customers", on = ["customer_id"], columns = ["t", "t"] }',
            r"lists column\(s\) t twice",
        ),
        (
            'join = { entity = "cust omers", on = ["customer_id"], columns = ["tier"] }',
            r"Invalid entity of the join 'cust omers'",
        ),
        (
            'join = { entity = "orders", on = ["customer_id"], columns = ["tier"] }',
            r"joins silver.orders with itself",
        ),
        (
            'join = { entity = "customers", on = ["id"], columns = ["tier"], as_of = "now" }',
            r"Invalid as_of 'now' in the join with 'customers'. Must be one of event_time, current",
        ),
        (
            'join = { entity = "customers", on = ["id"], columns = ["t"], as_of = "event_time" }',
            r"joins 'customers' as of event time, but it keeps no SCD type 2 history",
        ),
    ],
)
def test_one_clear_error_per_join_mistake(tmp_path: Path, join: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(toml(tmp_path, extra=join))


@pytest.mark.parametrize(
    ("customers", "as_of", "resolved"),
    [
        (
            '[[tables]]\nname = "customers"\ntopic = "shop.customers"\nstored_as_scd_type = 2',
            None,
            "event_time",
        ),
        (
            '[[tables]]\nname = "customers"\ntopic = "shop.customers"\nstored_as_scd_type = 2',
            "current",
            "current",
        ),
        ('[[tables]]\nname = "customers"\ntopic = "shop.customers"', None, "current"),
        ("", None, "current"),
        (
            '[[tables]]\nname = "customers"\ntopic = "shop.customers"\nformat = "events"\n'
            'keys = ["id"]\nsequence_by = ["seq"]\nstored_as_scd_type = 2',
            None,
            "current",
        ),
    ],
)
def test_a_join_is_as_of_event_time_when_its_entity_keeps_timed_history(
    tmp_path: Path, customers: str, as_of: str | None, resolved: str
) -> None:
    """Default: as of event time for a Debezium entity with SCD type 2 history (its versions
    have source commit times), current otherwise; ``as_of`` says it explicitly."""
    setting = "" if as_of is None else f', as_of = "{as_of}"'
    path = toml(tmp_path, extra=JOIN.replace("] }", f"]{setting} }}"))
    path.write_text(path.read_text(encoding="utf-8") + "\n" + customers + "\n", encoding="utf-8")
    (table,) = load_config(path).gold_declarations
    assert table.join is not None and table.join.as_of == resolved


def test_joined_columns_are_checked_once_both_schemas_are_known() -> None:
    table = GoldTable(
        "by_tier",
        "orders",
        "created_at",
        Window("tumbling", size="1 hour"),
        (Measure("revenue", "sum", "total"),),
        group_by=("tier",),
        filter="tier <> 'gold'",
        join=Join("customers", (("customer_id", "id"),), ("tier",)),
    )
    assert table.source_columns == ("created_at", "total", "customer_id")
    orders = ["id", "customer_id", "created_at", "total"]
    table.check_columns(orders, ["id", "tier"])
    with pytest.raises(ConfigError) as raised:
        table.check_columns(orders, ["id", "segment"])
    assert str(raised.value) == (
        "Gold table 'by_tier' joins column 'tier', which silver.customers does not have. "
        "Columns: id, segment."
    )
    with pytest.raises(ConfigError) as raised:
        table.check_columns([*orders, "tier"], ["id", "tier"])
    assert str(raised.value) == (
        "Gold table 'by_tier': joined column 'tier' of silver.customers would hide "
        "silver.orders's own 'tier': set a prefix in the join, e.g. prefix = \"customers_\"."
    )


STREAM_ENTRY = """
[[gold]]
name = "order_attribution"
source = "orders"
event_time = "created_at"
group_by = ["id", "customer_id"]
measures = [{measures}]
{window}
{stream_join}
"""
STREAM_MEASURES = (
    '{ name = "clicks", fn = "count" }, { name = "last_page", fn = "last", column = "page" }'
)
STREAM_JOIN = (
    '[gold.stream_join]\nsource = "clickstream"\non = { customer_id = "user_id" }\n'
    'event_time = "ts"\nwithin = "30 minutes"'
)
ATTRIBUTION = GoldTable(
    name="order_attribution",
    source="orders",
    event_time="created_at",
    window=Window("row"),
    measures=(Measure("clicks", "count"), Measure("last_page", "last", "page")),
    group_by=("id", "customer_id"),
    stream_join=StreamJoin("clickstream", (("customer_id", "user_id"),), "ts", "30 minutes"),
)


def stream_toml(
    tmp_path: Path,
    stream_join: str = STREAM_JOIN,
    window: str = "",
    measures: str = STREAM_MEASURES,
) -> Path:
    path = tmp_path / "pipeline.toml"
    text = STREAM_ENTRY.format(measures=measures, window=window, stream_join=stream_join)
    path.write_text(text, encoding="utf-8")
    return path


def test_a_stream_join_loads_as_the_python_declaration(tmp_path: Path) -> None:
    (table,) = load_config(stream_toml(tmp_path)).gold_declarations
    assert table == ATTRIBUTION
    assert table.columns == (
        "id",
        "customer_id",
        "window_start",
        "window_end",
        "clicks",
        "last_page",
    )
    assert table.key == ("id", "customer_id", "window_end")
    assert table.source_columns == ("created_at", "id", "customer_id")
    assert table.other_columns == ("user_id", "ts", "page")
    explicit = stream_toml(tmp_path, window='window = { kind = "row" }')
    assert load_config(explicit).gold_declarations == (ATTRIBUTION,)
    inline = (
        'stream_join = { source = "clickstream", on = ["customer_id"], event_time = "ts", '
        'within = "1 hour" }'
    )
    (same_names,) = load_config(stream_toml(tmp_path, inline)).gold_declarations
    assert same_names.stream_join == StreamJoin(
        "clickstream", (("customer_id", "customer_id"),), "ts", "1 hour"
    )


@pytest.mark.parametrize(
    ("stream_join", "window", "measures", "message"),
    [
        (
            'stream_join = "clickstream"',
            "",
            STREAM_MEASURES,
            r"'stream_join' of \[\[gold\]\] 'order_attribution' must be a table",
        ),
        (
            STREAM_JOIN.replace('within = "30 minutes"', ""),
            "",
            STREAM_MEASURES,
            r"The stream join of \[\[gold\]\] 'order_attribution' needs 'within', e\.g\.",
        ),
        (
            STREAM_JOIN + '\nlag = "1 minute"',
            "",
            STREAM_MEASURES,
            r"Unknown setting\(s\) lag in the stream join of \[\[gold\]\] 'order_attribution'",
        ),
        (
            STREAM_JOIN.replace('"30 minutes"', '"half an hour"'),
            "",
            STREAM_MEASURES,
            r"^Gold table 'order_attribution': stream_join\.within 'half an hour' is not a ",
        ),
        (
            STREAM_JOIN.replace('{ customer_id = "user_id" }', '"customer_id"'),
            "",
            STREAM_MEASURES,
            r"'on' of the stream join of \[\[gold\]\] 'order_attribution' must map each source",
        ),
        (
            STREAM_JOIN.replace('{ customer_id = "user_id" }', "[]"),
            "",
            STREAM_MEASURES,
            r"The stream join with 'clickstream' has no 'on' columns",
        ),
        (
            STREAM_JOIN.replace('{ customer_id = "user_id" }', '{ email = "user_id" }'),
            "",
            STREAM_MEASURES,
            r"the stream join's 'on' column 'email' is not in group_by .* add 'email' to",
        ),
        (
            STREAM_JOIN.replace('"clickstream"', '"orders"'),
            "",
            STREAM_MEASURES,
            r"stream-joins silver\.orders with itself",
        ),
        (
            STREAM_JOIN,
            f"window = {{ {GOOD_WINDOW} }}",
            STREAM_MEASURES,
            r"has a stream join, so one row per source row: set window = \{ kind = \"row\" \}",
        ),
        (
            STREAM_JOIN,
            'window = { kind = "row", size = "1 hour" }',
            STREAM_MEASURES,
            r"A row window takes no settings \(its bound is the stream join's within\): remove",
        ),
        (
            "",
            'window = { kind = "row" }',
            STREAM_MEASURES,
            r"has a row window but no stream join: add a \[gold\.stream_join\] table",
        ),
        (
            "",
            "",
            STREAM_MEASURES,
            r"\[\[gold\]\] 'order_attribution' needs 'window'",
        ),
        (
            STREAM_JOIN,
            "",
            '{ name = "last_page", fn = "last" }',
            r"Measure 'last_page' \(last\) needs a column",
        ),
        (
            STREAM_JOIN,
            "",
            '{ name = "clicks", fn = "first", column = "page" }',
            r"Unknown measure function 'first' for measure 'clicks'\..*"
            r"span_seconds, last, max_by, min_by, expr\.",
        ),
    ],
)
def test_one_clear_error_per_stream_join_mistake(
    tmp_path: Path, stream_join: str, window: str, measures: str, message: str
) -> None:
    path = stream_toml(tmp_path, stream_join, window, measures)
    with pytest.raises(ConfigError, match=message):
        load_config(path)


def test_a_stream_join_and_a_join_do_not_mix() -> None:
    with pytest.raises(ConfigError, match="has both a join and a stream join: declare one"):
        replace(ATTRIBUTION, join=Join("customers", (("customer_id", "id"),), ("tier",)))


def test_stream_joined_columns_are_checked_once_both_schemas_are_known() -> None:
    orders = ["id", "customer_id", "created_at", "total"]
    ATTRIBUTION.check_columns(orders, ["user_id", "ts", "page"])
    with pytest.raises(ConfigError) as raised:
        ATTRIBUTION.check_columns(orders, ["user_id", "ts", "url"])
    assert str(raised.value) == (
        "Gold table 'order_attribution' stream-joins column 'page', which silver.clickstream "
        "does not have. Columns: ts, url, user_id."
    )
    with pytest.raises(ConfigError, match=r"reads column 'customer_id', which silver\.orders"):
        ATTRIBUTION.check_columns(["id", "created_at"], ["user_id", "ts", "page"])


def test_computed_columns_filters_by_and_top_n_load_as_the_python_declaration(
    tmp_path: Path,
) -> None:
    measures = (
        '{ name = "big", fn = "count", filter = "total >= 100" }, '
        '{ name = "top", fn = "max_by", column = "customer_id", by = "total_eur" }'
    )
    extra = (
        'columns = { total_eur = "total * 0.908", big_order = "total_eur > 50" }\n'
        'top_n = { n = 3, order_by = "big DESC, top", partition_by = ["customer_id"] }'
    )
    (table,) = load_config(toml(tmp_path, measures=measures, extra=extra)).gold_declarations
    assert table == GoldTable(
        name="spend",
        source="orders",
        event_time="created_at",
        window=Window("tumbling", size="1 hour"),
        measures=(
            Measure("big", "count", filter="total >= 100"),
            Measure("top", "max_by", "customer_id", by="total_eur"),
        ),
        group_by=("customer_id",),
        computed={"total_eur": "total * 0.908", "big_order": "total_eur > 50"},
        top_n=TopN(3, (("big", True), ("top", False)), ("customer_id",)),
    )
    # The computed columns read source columns; the measures read computed ones.
    assert table.source_columns == ("created_at", "customer_id", "total")
    assert table.key == ("customer_id", "window_start")


@pytest.mark.parametrize(
    ("measures", "extra", "message"),
    [
        (
            '{ name = "m", fn = "max_by", column = "total" }',
            "",
            r"Measure 'm' \(max_by\) needs by, the column whose greatest value picks the row",
        ),
        (
            '{ name = "m", fn = "sum", column = "total", by = "x" }',
            "",
            r"Measure 'm': by only applies to max_by and min_by; remove it\.",
        ),
        (
            '{ name = "m", fn = "count", filter = "total > (SELECT 1)" }',
            "",
            r"Unsupported condition .* for filter of measure 'm'",
        ),
        (
            GOOD_MEASURES,
            "columns = { x = \"java_method('java.lang.System', 'exit', 1)\" }",
            r"Unsupported expression .* for computed column 'x' of gold table 'spend'",
        ),
        (
            GOOD_MEASURES,
            "columns = { x = 3 }",
            r"'columns' of \[\[gold\]\] 'spend' must be a table",
        ),
        (
            GOOD_MEASURES,
            'columns = { created_at = "now()" }',
            r"event_time 'created_at' cannot be a computed column yet",
        ),
        (
            GOOD_MEASURES,
            'columns = { "a b" = "total" }',
            r"Invalid computed column of gold table 'spend' 'a b'",
        ),
        (
            GOOD_MEASURES,
            'top_n = { n = 0, order_by = "revenue DESC" }',
            r"Invalid top_n n 0: use a whole number of rows, 1 or more\.",
        ),
        (
            GOOD_MEASURES,
            'top_n = { n = 2, order_by = "revenue DOWN" }',
            r"Invalid top_n order_by 'revenue DOWN'",
        ),
        (
            GOOD_MEASURES,
            'top_n = { n = 2, order_by = "price DESC" }',
            r"top_n orders by 'price', which is not one of its columns",
        ),
        (
            GOOD_MEASURES,
            'top_n = { n = 2, order_by = "revenue", partition_by = ["total"] }',
            r"top_n partition_by column 'total' is not in group_by",
        ),
        (
            GOOD_MEASURES,
            'top_n = { n = 2, order_by = "revenue", limit = 3 }',
            r"Unknown setting\(s\) limit in the top_n of",
        ),
    ],
)
def test_one_clear_error_per_expression_or_top_n_mistake(
    tmp_path: Path, measures: str, extra: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(toml(tmp_path, measures=measures, extra=extra))


def test_top_n_needs_a_tumbling_or_hopping_window() -> None:
    with pytest.raises(ConfigError, match=r"takes a tumbling or hopping window, not session"):
        GoldTable(
            "s",
            "orders",
            "created_at",
            Window("session", gap="5 minutes"),
            (Measure("n", "count"),),
            group_by=("customer_id",),
            top_n=TopN(1, (("n", True),)),
        )


def test_a_computed_column_may_not_hide_a_source_column() -> None:
    table = GoldTable(
        "s",
        "orders",
        "created_at",
        Window("tumbling", size="1 hour"),
        (Measure("n", "count"),),
        computed={"total": "total * 2"},
    )
    with pytest.raises(ConfigError, match=r"computed column 'total' would hide silver\.orders"):
        table.check_columns(("created_at", "total"))
