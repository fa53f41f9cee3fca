"""The ``lakehouse`` command line: the group, its commands and the entry point.

Each command lives in a module of :mod:`lakehouse.cli` and is registered here.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

import click

from lakehouse import LOGGERS
from lakehouse.cli import (
    drop,
    fit,
    ops,
    plan,
    quality,
    run,
    serve,
    sql,
    status,
    ui,
)
from lakehouse.cli.common import DEBUG, INTERNAL_ERROR_EXIT, errors, first_line, showing_steps
from lakehouse_core.errors import LakehouseError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """cdc-lakehouse: Debezium CDC and event streams into a Delta medallion lakehouse."""


for command in (
    run.run,
    plan.plan,
    ops.verify,
    quality.validate,
    ops.replay,
    ops.forget,
    ops.maintain,
    drop.drop,
    sql.sql,
    status.status,
    ui.ui,
    serve.serve,
    fit.fit,
):
    cli.add_command(command)


#: Loggers whose records a command never prints: Spark's query context, librdkafka's own lines
#: (connection retries...: every failure that matters is raised as an error).
QUIET_LOGGERS = (
    "DataFrameQueryContextLogger",
    "SQLQueryContextLogger",
    "cdc.kafka",
    "cdc.kafka_source.librdkafka",
)


def main(
    args: Sequence[str] | None = None, group: click.Group = cli, loggers: Sequence[str] = LOGGERS
) -> None:
    """Entry point (``args``: the command line, default ``sys.argv[1:]``; ``group``, ``loggers``:
    the commands and the loggers whose steps are shown, the demo's command line passes its
    own): user errors become one line on stderr and exit status 2; an internal error (a bug)
    one line saying so and exit status 1, unless ``--debug`` (``lakehouse run``) or
    ``LAKEHOUSE_DEBUG`` asks for its trace."""
    DEBUG.set(False)
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        with showing_steps(names=loggers):  # what the layers log: ``- layer: step`` lines
            group(args=args, standalone_mode=False)
    except click.exceptions.Abort:
        errors.print("aborted")
        sys.exit(130)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except LakehouseError as error:
        if os.environ.get("LAKEHOUSE_DEBUG"):
            raise
        errors.print(f"error: {error}", markup=False, highlight=False, emoji=False, soft_wrap=True)
        sys.exit(2)
    except Exception as error:
        if DEBUG.get() or os.environ.get("LAKEHOUSE_DEBUG"):
            raise
        errors.print(
            f"error: internal error: {type(error).__name__}: {first_line(str(error))}; rerun "
            "with LAKEHOUSE_DEBUG=1 (lakehouse run: --debug) to see its whole trace",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(INTERNAL_ERROR_EXIT)
