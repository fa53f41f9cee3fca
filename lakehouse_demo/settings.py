"""The demo shop's pipeline settings: its clickstream declared as an event stream and its two
gold tables. The product assumes none of it; the demo (:mod:`lakehouse_demo`), the tests and
``--config examples/shop.toml`` (the same settings as TOML) pass them explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass

from lakehouse_core.config import PipelineConfig, TableSpec
from lakehouse_core.durations import require_duration
from lakehouse_core.gold_tables import GoldTable, Measure, Window
from lakehouse_core.identifiers import require_identifier


@dataclass(frozen=True)
class ShopGoldSpec:
    """The tables and columns of the shop's two gold tables (:func:`shop_gold_tables`).

    Raises:
        ConfigError: a name is not a plain identifier, or a duration is not a number and a
            unit above 0.
    """

    orders_table: str = "orders"
    order_time: str = "created_at"
    order_amount: str = "total"
    revenue_window: str = "1 minute"
    clicks_table: str = "clickstream"
    click_user: str = "user_id"
    click_time: str = "ts"
    session_gap: str = "30 minutes"

    def __post_init__(self) -> None:
        for column in (
            self.orders_table,
            self.order_time,
            self.order_amount,
            self.clicks_table,
            self.click_user,
            self.click_time,
        ):
            require_identifier(column, "gold setting")
        for setting in ("revenue_window", "session_gap"):
            require_duration(getattr(self, setting), setting, owner="Shop gold settings")


def shop_gold_tables(spec: ShopGoldSpec | None = None) -> tuple[GoldTable, ...]:
    """The demo shop's gold tables as declarations (``spec`` None: the shop's own names):
    revenue and orders per tumbling window of order time, and each user's click sessions."""
    spec = ShopGoldSpec() if spec is None else spec
    return (
        GoldTable(
            name="revenue_per_minute",
            source=spec.orders_table,
            event_time=spec.order_time,
            window=Window("tumbling", size=spec.revenue_window),
            measures=(Measure("revenue", "sum", spec.order_amount), Measure("orders", "count")),
        ),
        GoldTable(
            name="user_sessions",
            source=spec.clicks_table,
            event_time=spec.click_time,
            window=Window(
                "session", gap=spec.session_gap, start_as="session_start", end_as="session_end"
            ),
            group_by=(spec.click_user,),
            measures=(
                Measure("events", "count"),
                Measure("duration_seconds", "span_seconds", spec.click_time),
            ),
        ),
    )


#: The shop's clickstream, a plain event stream (its CDC tables need no settings).
SHOP_CLICKSTREAM = TableSpec(
    name="clickstream",
    topic="shop.clickstream",
    format="events",
    keys=("event_id",),
    sequence_by=("ts",),
    schema="event_id string, user_id bigint, page string, action string, ts timestamp",
)

#: The demo shop's pipeline: its clickstream and its two gold tables.
SHOP_CONFIG = PipelineConfig(tables=(SHOP_CLICKSTREAM,), gold_tables=shop_gold_tables())
