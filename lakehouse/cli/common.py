"""What the commands share: options, console output, the Spark session and error lines."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.text import Text

from lakehouse import LOGGERS
from lakehouse_core.errors import ConfigError, LakehouseError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakehouse.run.declarations import Choice, Files
    from lakehouse_core.config import PipelineConfig
    from lakehouse_core.failures import TableFailure
    from lakehouse_core.layout import Warehouse

console = Console()
errors = Console(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])
#: Whether the command prints an internal error's whole trace (``lakehouse run --debug``).
DEBUG: ContextVar[bool] = ContextVar("lakehouse_debug", default=False)
#: Exit statuses: a problem the user can fix, and an internal error (a bug).
USER_ERROR_EXIT, INTERNAL_ERROR_EXIT = 2, 1


def spark_options(command: F) -> F:
    """Options shared by every command that starts Spark."""
    command = click.option(
        "--spark-mode",
        type=click.Choice(["auto", "active", "local-jars", "maven"]),
        default="auto",
        show_default=True,
        help="How Delta gets onto Spark: reuse a session, jars from the jsoniq wheel, or Maven.",
    )(command)
    return click.option(
        "--master",
        default=None,
        help="Spark master URL (default: the submitted one under spark-submit, else local[2]).",
    )(command)


SEED = click.option(
    "--seed", default=42, show_default=True, type=int, help="Random seed (same seed, same records)."
)
MALFORMED_RATE = click.option(
    "--malformed-rate",
    default=0.01,
    show_default=True,
    type=float,
    help="Share of malformed records (0 to 1).",
)
_CONFIG_OPTION = click.option(
    "--config",
    "config_path",
    default=None,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Pipeline TOML file (default: the declarations the warehouse last ran with, else none: "
    "Debezium topics still become silver tables, everything else is declared here; the demo "
    "shop's: examples/shop.toml).",
)
#: Where :func:`given_config` finds ``--declarations`` (it reaches no command's arguments).
_DECLARATIONS_KEY = "lakehouse.declarations"


def _keep_declarations(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.meta[_DECLARATIONS_KEY] = value


_DECLARATIONS_OPTION = click.option(
    "--declarations",
    default=None,
    metavar="FILE.py[:NAME]|MODULE:NAME|FILE.toml",
    expose_value=False,
    callback=_keep_declarations,
    help="The pipeline declared in Python instead of --config: a file or module and the name "
    "of its PipelineConfig, Lakehouse or Pipeline (or of a function returning one; the "
    "file's one pipeline without :NAME), or a pipeline TOML file.",
)


def CONFIG(command: F) -> F:  # used as @CONFIG, as the options beside it
    """The options that give a command its declarations: ``--config`` and ``--declarations``
    (:func:`given_config` reads either)."""
    return _CONFIG_OPTION(_DECLARATIONS_OPTION(command))


KAFKA_OPTION = click.option(
    "--kafka-option",
    "kafka_option",
    multiple=True,
    metavar="KEY=VALUE",
    help="A Kafka source option (subscribe, maxOffsetsPerTrigger, ...) or librdkafka setting "
    "as kafka.<setting>; repeatable.",
)
KAFKA_SETTINGS = click.option(
    "--kafka-settings",
    default=None,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="librdkafka settings file (key=value lines), e.g. SASL/SSL; keeps secrets off the "
    "command line.",
)


class WarehouseLocation(click.ParamType):
    """A warehouse root: a Hadoop URI (``s3a://bucket/wh``, ``abfss://...``, ``dbfs:/...``),
    taken as given, or a local directory (which must exist if ``exists``)."""

    name = "DIR|URI"

    def __init__(self, exists: bool = False) -> None:
        self.exists = exists

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from lakehouse_core.layout import is_uri

        text = str(value)
        if self.exists and not is_uri(text) and not Path(text).is_dir():
            self.fail(
                f"no warehouse directory {text!r}: give an existing warehouse directory or a "
                "URI such as s3a://bucket/warehouse.",
                param,
                ctx,
            )
        return text


EXISTING_WAREHOUSE = click.option(
    "--warehouse",
    required=True,
    type=WarehouseLocation(exists=True),
    help="Warehouse root: a directory or a Hadoop URI (s3a://bucket/warehouse, abfss://...).",
)


def given_config(config_path: Path | None) -> PipelineConfig | None:
    """The declarations of ``--config`` or ``--declarations`` (:mod:`lakehouse.cli.declared`;
    None: neither given), read before Spark starts.

    Raises:
        ConfigError: both are given, or what reading them raises.
    """
    from lakehouse_core.config import load_config

    spec = given_declarations()
    if spec is None:
        return None if config_path is None else load_config(config_path)
    if config_path is not None:
        raise ConfigError(
            f"Both --config {config_path} and --declarations {spec} given: give one of them."
        )
    from lakehouse.cli.declared import load_declarations

    return load_declarations(spec)


def given_declarations() -> str | None:
    """The value of the running command's ``--declarations`` (None: not given)."""
    ctx = click.get_current_context(silent=True)
    return None if ctx is None else ctx.meta.get(_DECLARATIONS_KEY)


def declarations_name(config_path: Path | None) -> str:
    """How the command's given declarations are named in a message: the ``--config`` file,
    or ``--declarations <value>``."""
    spec = given_declarations()
    return f"--declarations {spec}" if spec is not None else str(config_path)


def declarations(
    given: PipelineConfig | None, warehouse: str, spark: SparkSession | None = None
) -> Choice:
    """The declarations a command runs with (:func:`lakehouse.run.declarations.choose`):
    ``given`` (``--config``), else those ``warehouse`` last ran with, else none; a note on
    stderr when ``given`` differs from those. A local warehouse's are read as plain files, a
    URI's through ``spark`` if given, else with ``pyarrow`` (as ``lakehouse status`` reads)."""
    from lakehouse.run.declarations import choose, newest_recorded
    from lakehouse_core.layout import Warehouse

    place = Warehouse.from_path(warehouse)
    chosen = choose(given, newest_recorded(place, warehouse_files(place, spark)))
    if chosen.note is not None:
        errors.print(chosen.note, markup=False, highlight=False, soft_wrap=True)
    return chosen


def warehouse_files(place: Warehouse, spark: SparkSession | None = None) -> Files | None:
    """How the files of ``place`` are read (:class:`lakehouse.run.declarations.Files`): None
    (plain files) for a local warehouse; a URI's through ``spark`` if given, else ``pyarrow``."""
    from lakehouse.run.declarations import Files, hadoop_files
    from lakehouse_core.layout import is_uri

    if not is_uri(place.root):
        return None
    if spark is not None:
        return hadoop_files(spark)
    from lakehouse.ops.status import _names, _read_text

    return Files(_names, _read_text)


def kafka_options(pairs: tuple[str, ...], settings_file: Path | None) -> dict[str, str]:
    """Source options from ``--kafka-settings`` and ``--kafka-option`` (the latter win)."""
    from cdc.kafka_options import is_secret
    from cdc.sources import read_kafka_settings

    options = read_kafka_settings(settings_file) if settings_file else {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise LakehouseError(f"--kafka-option {key or pair!r}: write it as KEY=VALUE.")
        if is_secret(key):
            raise LakehouseError(
                f"--kafka-option {key}: a secret on the command line lands in shell history and "
                "the process list. Put it in a file given with --kafka-settings FILE "
                "(key=value lines, without the kafka. prefix) instead."
            )
        options[key] = value
    return options


def show(value: Any) -> str:
    """A cell as printed: ``NULL`` for None."""
    return "NULL" if value is None else str(value)


def print_table(title: str | None, columns: list[str], rows: list[list[Any]]) -> None:
    """A table on stdout as plain aligned text that fits the terminal (or 80 columns in a
    pipe) where its cells allow: cells shown literally and whole, a row whose cells do not
    fit has its text cells on lines of their own; a blank line after it."""
    from lakehouse.cli.plain import columns_for, table_lines

    cells = [[show(value) for value in row] for row in rows]
    for line in table_lines(title, columns_for(columns, cells), cells, console.width):
        console.print(line, markup=False, highlight=False, emoji=False, crop=False, soft_wrap=True)
    console.print()


class RunningStep:
    """On a terminal, the step a long command is in, live below its lines: a spinner, the
    step, a moving bar and the time it has taken so far (gone when the command ends)."""

    def __init__(self) -> None:
        self._bar: Progress | None = None

    def show(self, message: str) -> None:
        if not console.is_terminal:
            return
        if self._bar is None:
            self._bar = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}", markup=False),
                BarColumn(),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            )
            self._bar.start()
        for task in self._bar.task_ids:
            self._bar.remove_task(task)
        self._bar.add_task(Text(message).plain, total=None)

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


running_step = RunningStep()


class StepLines(logging.Handler):
    """Prints log records as a command's lines: below WARNING as ``- layer: what`` (dim, the
    record's message), shown on a terminal as the running step too (:data:`running_step`);
    WARNING and above as ``warning: ...`` on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            if record.levelno >= logging.WARNING:
                errors.print(f"warning: {message}", markup=False, highlight=False, soft_wrap=True)
                return
            console.print(f"- {message}", style="dim", markup=False, highlight=False)
            running_step.show(message)
        except Exception:
            self.handleError(record)


@contextmanager
def showing_steps(level: int = logging.INFO, names: Sequence[str] = LOGGERS) -> Iterator[StepLines]:
    """While the block runs, the loggers ``names`` (:data:`lakehouse.LOGGERS`) print their
    records of ``level`` and above through a :class:`StepLines` handler (and only there: they do not
    propagate to the root logger's handlers); yields that handler. Their levels, handlers and
    propagation are as before afterwards. Other loggers (py4j, sqlglot, ...) are left alone."""
    handler = StepLines(level)
    loggers = [logging.getLogger(name) for name in names]
    before = [(logger.level, logger.propagate) for logger in loggers]
    for logger in loggers:
        logger.setLevel(level)
        logger.addHandler(handler)
        logger.propagate = False
    try:
        yield handler
    finally:
        for logger, (was, propagate) in zip(loggers, before, strict=True):
            logger.removeHandler(handler)
            logger.setLevel(was)
            logger.propagate = propagate


@contextmanager
def spark_session(
    spark_mode: str, master: str | None, warehouse: str | None = None
) -> Iterator[SparkSession]:
    """The session a command runs in (see :func:`lakehouse_core.spark.get_spark`); the running step
    shown by :class:`StepLines` ends with it. An error the command raises that stands for a
    user's problem (:func:`translated_error`) is raised as that one line; a full disk names
    ``warehouse``."""
    from lakehouse_core.failures import DiskFullError, name_location
    from lakehouse_core.spark import get_spark

    running_step.stop()
    with console.status("starting Spark"):
        spark = get_spark(mode=spark_mode, master=master)  # type: ignore[arg-type]
    spark.sparkContext.setLogLevel("ERROR")
    _quiet_task_errors(spark)
    try:
        yield spark
    except Exception as error:
        translated = translated_error(error)
        if translated is None:
            raise
        if warehouse and isinstance(translated, DiskFullError):
            translated = DiskFullError(name_location(str(translated), warehouse))
        raise translated from error
    finally:
        running_step.stop()


#: Spark's loggers that print the whole trace of each failed task, write or job (pages each,
#: the same error many times over: a full disk, an unreachable broker). The query's failure
#: carries that trace to the event log (column ``trace``) and the command's one error line.
TASK_ERROR_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.util.Utils",
    "org.apache.spark.sql.execution.datasources.FileFormatWriter",
    "org.apache.spark.sql.execution.datasources.FileFormatDataWriter",
    "org.apache.spark.sql.execution.datasources.v2.DataWritingSparkTask",
    "org.apache.spark.sql.delta.files.DeltaFileFormatWriter",
    "org.apache.spark.sql.execution.streaming.CheckpointFileManager",
)


def _quiet_task_errors(spark: SparkSession) -> None:
    """Turn off :data:`TASK_ERROR_LOGGERS` in the session's JVM (log4j 2)."""
    jvm = spark.sparkContext._jvm
    if jvm is None:
        return
    log4j = jvm.org.apache.logging.log4j
    for name in TASK_ERROR_LOGGERS:
        log4j.core.config.Configurator.setLevel(name, log4j.Level.OFF)


def translated_error(error: BaseException) -> LakehouseError | None:
    """The one-line user error a command's Java or Python error stands for, else None: a full
    disk (:func:`lakehouse_core.failures.disk_full`), or a warehouse this user may not write. The
    original stays the translation's cause (``LAKEHOUSE_DEBUG=1`` prints it)."""
    from lakehouse_core.failures import disk_full

    if isinstance(error, LakehouseError):
        return None
    text = f"{type(error).__name__}: {error}"
    full = disk_full(text)
    if full is not None:
        return full
    if isinstance(error, PermissionError) or "Permission denied" in text:
        where = getattr(error, "filename", None) or _denied_path(text)
        return LakehouseError(
            f"Permission denied on {where}: this user may not write the warehouse; run as a "
            "user who may, or on a writable copy"
        )
    return None


def _denied_path(text: str) -> str:
    """The path a ``Permission denied`` message names, else ``a warehouse file``."""
    for word in text.replace("'", " ").replace('"', " ").split():
        if word.startswith(("/", "file:/")):
            return word.rstrip(":,")
    return "a warehouse file"


def failure_line(failed: TableFailure, debug: bool = False) -> str:
    """The error line of a failed table: the table and the user's error, or for an internal
    error that it is one and where its whole trace is (``debug``: printed after the line)."""
    failure = failed.failure
    if failure.user:
        return f"error: {failed.table}: {failure.first_line}"
    where = (
        "its whole trace follows"
        if debug
        else "its whole trace is in the event log (system.event_log, column trace, query "
        f"{failed.query}), or rerun with --debug"
    )
    return f"error: internal error in {failed.table}: {failure.line}; {where}"


def print_failures(
    failures: list[TableFailure], debug: bool = False, warehouse: str | None = None
) -> int:
    """One error line per failed table on stderr (:func:`failure_line`; a full disk once,
    whichever tables it stopped, naming ``warehouse`` where Java's error names no location);
    the exit status:
    :data:`USER_ERROR_EXIT` if each is the user's to fix, else :data:`INTERNAL_ERROR_EXIT`."""
    from lakehouse_core.failures import DiskFullError, name_location

    said: set[str] = set()
    for failed in failures:
        line = failure_line(failed, debug)
        if isinstance(failed.failure.error, DiskFullError):  # one disk: one line
            line = f"error: {failed.failure.first_line}"
            line = name_location(line, warehouse) if warehouse else line
        if line in said:
            continue
        said.add(line)
        errors.print(line, markup=False, highlight=False, soft_wrap=True)
        if debug and not failed.failure.user:
            errors.print(
                failed.failure.trace.rstrip(), markup=False, highlight=False, soft_wrap=True
            )
    internal = any(not failed.failure.user for failed in failures)
    return INTERNAL_ERROR_EXIT if internal else USER_ERROR_EXIT


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text
