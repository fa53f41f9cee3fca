"""Bad input a user gives is refused with one line that names the problem and the fix, never a
Python traceback (robustness issue: config files, conditions, durations, secrets)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cdc.sources import SourceSpec
from lakehouse_core.conditions import MAX_OPERATORS, parse_condition
from lakehouse_core.config import load_config
from lakehouse_core.errors import ConfigError
from lakehouse_core.streaming import failure_cause
from lakehouse_demo.settings import ShopGoldSpec
from tests.cli import run_cli, run_demo_cli


def config_file(tmp_path: Path, content: bytes) -> Path:
    path = tmp_path / "pipeline.toml"
    path.write_bytes(content)
    return path


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'[[tables]]\nname = "caf\xe9"\ntopic = "t"\n', r"is not UTF-8 text \(byte 22\)"),
        (b"tables = 5\n", r"^'tables' must be a list of tables: write each as a \[\[tables\]\]"),
        (b"tables = [5]\n", r"^'tables' must be a list of tables"),
        (
            b"gold = 5\n",
            r"^'gold' must be \[\[gold\]\] entries \(one per gold table\)",
        ),
        (
            b"gold = [5]\n",
            r"^'gold' must be a list of tables: write each gold table as a \[\[gold\]\]",
        ),
        (b"maintenance = 5\n", r"^'maintenance' must be a table"),
        (b"x = " + b"[" * 5000 + b"]" * 5000 + b"\n", r"(too deeply|not valid TOML)"),
        (
            b'[[tables]]\nname = "a"\ntopic = "t"\n[[tables]]\nname = "b"\ntopic = "t"\n',
            r"^Each topic can have one \[\[tables\]\] entry; repeated: t\. Merge",
        ),
    ],
    ids=[
        "not-utf8",
        "tables-int",
        "tables-item",
        "gold-int",
        "gold-item",
        "maintenance-int",
        "deep",
        "topic",
    ],
)
def test_config_file_errors_are_one_line(tmp_path: Path, content: bytes, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        load_config(config_file(tmp_path, content))
    assert "\n" not in str(raised.value)


def test_deeply_nested_condition_is_refused() -> None:
    deep = "(" * 5000 + "a = 1" + ")" * 5000
    with pytest.raises(
        ConfigError, match=f"5001 operators and parentheses; at most {MAX_OPERATORS}"
    ):
        parse_condition(deep, "apply_as_deletes of table 'x'")
    long_chain = " AND ".join(["a = 1"] * 1000)
    with pytest.raises(ConfigError, match="1999 operators") as raised:
        parse_condition(long_chain, "apply_as_deletes of table 'x'")
    assert len(str(raised.value)) < 1200  # the condition is shown cut, not whole
    # Parentheses inside a text literal are not operators.
    chain = " OR ".join(["a = '(((('"] * (MAX_OPERATORS // 2))
    parse_condition(chain, "apply_as_deletes of table 'x'")


@pytest.mark.parametrize("setting", ["revenue_window", "session_gap"])
def test_zero_length_window_is_refused_at_load(setting: str) -> None:
    with pytest.raises(
        ConfigError, match=rf"^Shop gold settings: {setting} '0 minutes' is too short: .* 0,"
    ):
        ShopGoldSpec(**{setting: "0 minutes"})


def test_source_spec_repr_hides_secrets() -> None:
    spec = SourceSpec(
        "kafka",
        "broker:9092",
        kafka_options={"kafka.sasl.password": "hunter2", "kafka.sasl.username": "ann"},
    )
    shown = repr(spec)
    assert "hunter2" not in shown
    assert "'kafka.sasl.username': 'ann'" in shown and "redacted" in shown


def test_secret_on_the_command_line_is_refused(tmp_path: Path) -> None:
    result = run_cli(
        "run",
        "--source",
        "kafka:127.0.0.1:9",
        "--warehouse",
        tmp_path,
        "--kafka-option",
        "kafka.sasl.password=hunter2",
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "hunter2" not in result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "--kafka-settings FILE" in errors[0], result.stderr


def test_a_failed_batch_function_names_its_python_error() -> None:
    spark_error = (
        "[STREAM_FAILED] Query [id = 1] terminated with exception: "
        "[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in "
        "foreach batch sink. Reason: An exception was raised by the Python Proxy. Return "
        "Message: Traceback (most recent call last):\n"
        '  File "gold/jobs.py", line 70, in merge\n'
        "pyspark.errors.exceptions.captured.AnalysisException: [UNRESOLVED_COLUMN] A column "
        "named `created_at` cannot be resolved.\n\n\tat py4j.Protocol.getReturnValue(...)\n"
    )
    assert failure_cause(spark_error) == (
        "pyspark.errors.exceptions.captured.AnalysisException: [UNRESOLVED_COLUMN] A column "
        "named `created_at` cannot be resolved."
    )
    assert failure_cause("[DELTA_X] Something broke.\nmore") == "[DELTA_X] Something broke."


def test_missing_source_directory_is_refused_before_spark_starts(tmp_path: Path) -> None:
    result = run_cli("run", "--source", f"files:{tmp_path / 'nope'}", "--warehouse", tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "does not exist or is not a directory" in errors[0], errors


def test_generate_into_an_unwritable_place_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    result = run_demo_cli("generate", "--out", blocker / "sub", "--events", "10")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Cannot write the workload to" in errors[0], errors


@pytest.mark.parametrize(
    ("schema", "problem"),
    [("id bigintt, ts timestamp", "UNSUPPORTED_DATATYPE"), ("id bigint ts", "PARSE_SYNTAX")],
)
def test_invalid_schema_ddl_is_refused_before_the_run_starts(
    spark: SparkSession, tmp_path: Path, schema: str, problem: str
) -> None:
    config = config_file(
        tmp_path,
        b'[[tables]]\nname = "clicks"\ntopic = "t"\nformat = "events"\nkeys = ["id"]\n'
        b'sequence_by = ["id"]\nschema = "' + schema.encode() + b'"\n',
    )
    (tmp_path / "source").mkdir()
    warehouse = tmp_path / "warehouse"
    result = run_cli(
        "run",
        "--source",
        f"files:{tmp_path / 'source'}",
        "--warehouse",
        warehouse,
        "--once",
        "--config",
        config,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, errors
    assert f"Table 'clicks': schema {schema!r} is not a list of 'name type' columns" in errors[0]
    assert problem in errors[0] and "'id bigint, ts timestamp'" in errors[0]
    assert not warehouse.exists(), "the run started"
