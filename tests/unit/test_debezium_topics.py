"""Debezium's own topics by name (issue 63, item 4): heartbeats, transaction metadata and the
signalling table, as ``[debezium]`` names them (Debezium's defaults unless configured)."""

from __future__ import annotations

import pytest

from lakehouse_core.config import DebeziumSpec
from lakehouse_core.errors import ConfigError
from lakehouse_core.loader import config_from_toml

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("topic", "kind"),
    [
        ("__debezium-heartbeat.shop", "Debezium's heartbeats"),
        ("shop.transaction", "Debezium's transaction metadata"),
        ("shop.public.debezium_signal", "Debezium's signalling table"),
        ("debezium_signal", "Debezium's signalling table"),
        ("shop.public.transaction", None),  # a table named transaction is a table
        ("shop.public.orders", None),
        ("shop.public.debezium_signals", None),
        ("transaction", None),
    ],
)
def test_debezium_topics_by_their_default_names(topic: str, kind: str | None) -> None:
    assert DebeziumSpec().kind_of(topic) == kind


def test_a_connector_configured_with_other_names() -> None:
    config = config_from_toml(
        "[debezium]\n"
        'signal_tables = ["public.signals"]\n'
        'heartbeat_prefix = "hb"\n'
        'transaction_topic = "tx"\n'
    )
    names = config.debezium
    assert names.kind_of("shop.public.signals") == "Debezium's signalling table"
    assert names.kind_of("other.public.signals") == "Debezium's signalling table"
    assert names.kind_of("shop.public.debezium_signal") is None  # the names replace the defaults
    assert names.kind_of("hb.shop") == "Debezium's heartbeats"
    assert names.kind_of("shop.tx") == "Debezium's transaction metadata"
    assert names.kind_of("shop.transaction") is None
    assert config_from_toml(config.to_toml()) == config
    one = config_from_toml('[debezium]\nsignal_tables = "public.signals"\n')
    assert one.debezium.signal_tables == ("public.signals",)
    assert "[debezium]" not in config_from_toml("").to_toml()  # the defaults are not written


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('heartbeat_prefix = ""', "[debezium] heartbeat_prefix '' is not a topic name part"),
        ('signal_tables = [" x"]', "[debezium] signal_tables ' x' is not a topic name part"),
        ('heartbeat = "hb"', "Unknown setting(s) heartbeat in [debezium]"),
    ],
)
def test_bad_debezium_settings_are_named(toml: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        config_from_toml(f"[debezium]\n{toml}\n")
    assert message in str(raised.value)
