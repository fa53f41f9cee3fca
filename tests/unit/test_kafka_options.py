"""Kafka source options, offset arithmetic and error-line extraction: no broker, no Spark."""

from __future__ import annotations

import itertools
import logging

import pytest

from cdc.kafka_client import data_loss
from cdc.kafka_offsets import OffsetRange, cap_ends, from_json, split_ranges, to_json
from cdc.kafka_options import DEFAULT_GROUP_ID, REDACTED, is_secret, parse_options
from lakehouse_core.errors import ConfigError, DataLossError, SourceUnavailableError, raised_error

pytestmark = pytest.mark.unit

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "a,b"}


def test_defaults() -> None:
    options = parse_options(BASE)
    assert options.subscribe == ("a", "b")
    assert options.subscribe_pattern is None
    assert options.starting_offsets == "earliest"
    assert options.max_offsets_per_trigger is None
    assert options.cap_first_batch is False
    assert options.fail_on_data_loss is True
    assert options.include_headers is False
    assert options.timeout_ms == 30_000
    assert options.client_config["bootstrap.servers"] == "127.0.0.1:9092"
    assert options.client_config["group.id"] == DEFAULT_GROUP_ID
    assert options.client_config["enable.auto.commit"] is False
    assert options.client_config["auto.offset.reset"] == "error"


def test_names_are_case_insensitive_and_values_parsed() -> None:
    options = parse_options(
        {
            "KAFKA.Bootstrap.Servers": "h:1",
            "SUBSCRIBEPATTERN": "cdc\\..*",
            "startingoffsets": "LATEST",
            "maxOffsetsPerTrigger": "100",
            "failOnDataLoss": "False",
            "includeHeaders": "true",
            "timeoutMs": "500",
            "minPartitions": "4",
            "kafka.isolation.level": "read_uncommitted",
            "kafka.group.id": "mine",
        }
    )
    assert options.subscribe_pattern == "cdc\\..*"
    assert options.starting_offsets == "latest"
    assert options.max_offsets_per_trigger == 100
    assert options.fail_on_data_loss is False
    assert options.include_headers is True
    assert options.timeout_ms == 500
    assert options.min_partitions == 4
    assert options.client_config["isolation.level"] == "read_uncommitted"
    assert options.client_config["group.id"] == "mine"


def test_starting_offsets_json() -> None:
    options = parse_options(
        {**BASE, "startingOffsets": '{"a": {"0": 23, "1": -2}, "b": {"0": -1}}'}
    )
    assert options.starting_offsets == {("a", 0): 23, ("a", 1): -2, ("b", 0): -1}


def test_pattern_matches_whole_names_and_never_internal_topics() -> None:
    options = parse_options({"kafka.bootstrap.servers": "h:1", "subscribePattern": ".*orders"})
    assert options.subscribes_to("shop.orders")
    assert not options.subscribes_to("shop.orders.dlq")
    assert not options.subscribes_to("__orders")
    listed = parse_options({"kafka.bootstrap.servers": "h:1", "subscribe": "_schemas"})
    assert listed.subscribes_to("_schemas")


@pytest.mark.parametrize(
    ("options", "names"),
    [
        ({"subscribe": "a"}, "kafka.bootstrap.servers is required"),
        ({"kafka.bootstrap.servers": "h:1"}, "exactly one of 'subscribe'"),
        ({**BASE, "subscribePattern": "a"}, "exactly one of 'subscribe'"),
        ({**BASE, "subscribe": " , "}, "subscribe lists no topic"),
        ({"kafka.bootstrap.servers": "h:1", "subscribePattern": "("}, "not a valid regular"),
        ({**BASE, "startingOffsets": "first"}, "invalid startingOffsets 'first'"),
        ({**BASE, "startingOffsets": '{"a": {"0": -3}}'}, "invalid startingOffsets"),
        ({**BASE, "startingOffsets": '{"a": {"x": 1}}'}, "invalid startingOffsets"),
        ({**BASE, "startingOffsets": '{"c": {"0": 1}}'}, "topic(s) c that the query does not"),
        ({**BASE, "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger must be a positive"),
        ({**BASE, "maxOffsetsPerTrigger": "ten"}, "maxOffsetsPerTrigger must be a positive"),
        ({**BASE, "timeoutMs": "-5"}, "timeoutMs must be a positive integer"),
        ({**BASE, "failOnDataLoss": "no"}, "failOnDataLoss must be 'true' or 'false'"),
        ({**BASE, "startingOffset": "latest"}, "unknown option(s) startingoffset"),
        ({**BASE, "kafka.enable.auto.commit": "true"}, "kafka.enable.auto.commit is not supp"),
        ({**BASE, "kafka.auto.offset.reset": "latest"}, "use the startingOffsets option"),
    ],
)
def test_bad_options_name_the_problem_in_one_line(options: dict[str, str], names: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_options(options)
    message = str(raised.value)
    assert message.startswith("Kafka source: ")
    assert names in message
    assert "\n" not in message


def test_secrets_are_recognised_and_hidden() -> None:
    assert is_secret("kafka.sasl.password")
    assert is_secret("sasl.jaas.config")
    assert is_secret("ssl.key.pem")
    assert is_secret("ssl.keystore.password")
    assert is_secret("sasl.oauthbearer.client.secret")
    assert not is_secret("ssl.certificate.pem")
    assert not is_secret("sasl.username")
    options = parse_options({**BASE, "kafka.sasl.password": "hunter2", "kafka.sasl.username": "u"})
    assert "hunter2" not in repr(options)
    assert REDACTED in repr(options)
    assert options.scrub("login failed for hunter2") == f"login failed for {REDACTED}"


def test_offsets_round_trip_through_checkpoint_json() -> None:
    offsets = {("b", 1): 7, ("a", 0): 42, ("a", 10): 3}
    document = to_json(offsets)
    assert document == {"a": {"0": 42, "10": 3}, "b": {"1": 7}}
    assert from_json(document) == offsets


def test_cap_is_split_in_proportion_to_backlog_and_exact() -> None:
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 5}
    latest = {("t", 0): 300, ("t", 1): 200, ("t", 2): 5}
    ends = cap_ends(start, latest, 40)
    assert ends == {("t", 0): 30, ("t", 1): 110, ("t", 2): 5}
    assert sum(ends[tp] - start[tp] for tp in start) == 40
    odd = cap_ends(
        {("t", 0): 0, ("t", 1): 0, ("t", 2): 0}, {("t", 0): 9, ("t", 1): 9, ("t", 2): 9}, 10
    )
    assert sum(odd.values()) == 10
    assert all(3 <= end <= 4 for end in odd.values())
    assert cap_ends(start, latest, 1000) == latest


def test_split_ranges_for_min_partitions() -> None:
    ranges = [OffsetRange("t", 0, 0, 90), OffsetRange("t", 1, 10, 20)]
    assert split_ranges(ranges, None) == ranges
    pieces = split_ranges(ranges, 10)
    assert len(pieces) == 10
    assert (pieces[0].start, pieces[0].end) == (0, 10)
    for partition, low, high in ((0, 0, 90), (1, 10, 20)):
        mine = [r for r in pieces if r.partition == partition]
        assert mine[0].start == low
        assert mine[-1].end == high
        assert all(a.end == b.start for a, b in itertools.pairwise(mine))


def test_raised_error_rebuilds_our_error_from_a_spark_trace() -> None:
    trace = (
        "[STREAM_FAILED] Query [id = 1] terminated with exception: [PYTHON_STREAMING_DATA_SOURCE"
        "_RUNTIME_ERROR] Failed when Python streaming data source perform latestOffset: Traceback"
        ' (most recent call last):\n  File "x.py", line 1, in f\n'
        "lakehouse_core.errors.SourceUnavailableError: Kafka source: cannot reach the broker.\n"
        " SQLSTATE: 38000"
    )
    error = raised_error(trace)
    assert isinstance(error, SourceUnavailableError)
    assert str(error) == "Kafka source: cannot reach the broker."
    assert raised_error("plain Spark failure") is None
    assert raised_error("lakehouse_core.errors.NotOurs: x") is None


def test_data_loss_fails_or_warns_without_secrets(caplog: pytest.LogCaptureFixture) -> None:
    strict = parse_options({**BASE, "kafka.sasl.password": "hunter2"})
    with pytest.raises(DataLossError, match=r"^Kafka source: data loss: offsets of a\[1\] from 3 "):
        data_loss(strict, "a", 1, 3, 9)
    lenient = parse_options({**BASE, "failOnDataLoss": "false", "kafka.sasl.password": "hunter2"})
    with caplog.at_level(logging.WARNING, logger="cdc.kafka_source"):
        data_loss(lenient, "a", 1, 3, 9)
        data_loss(lenient, "b", 0, 5, None)
    assert "skipping lost records: offsets of a[1] from 3 are no longer available" in caplog.text
    assert "partition b[0] disappeared" in caplog.text
    assert "hunter2" not in caplog.text
