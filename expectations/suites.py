"""Great Expectations suites kept as files, read by name into GX's own suite model.

A suite is a GX 1.x ``ExpectationSuite`` JSON file ``<layer>/<table>.json`` named
``"<layer>.<table>"``, looked up in the user's directory (``[quality] suites``) and then, if
``packaged_suites`` is set, in this package's ``suites/`` directory (the demo shop's suites).
Each expectation's ``meta`` may hold ``"name"`` (how metrics, errors and ``[quality.actions]``
name it; default from column and type, e.g. ``total_be_between``) and ``"action"``: ``warn``
(default), ``drop`` or ``fail``. ``[quality.actions]`` overrides the action by
``"<layer>.<table>.<name>"``.

Great Expectations is imported only when a suite is read (it takes seconds to import).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse_core.config import QualityAction, QualitySpec, require_action
from lakehouse_core.errors import ConfigError
from lakehouse_core.expects import DeclaredSuite
from lakehouse_core.identifiers import require_identifier
from lakehouse_core.layout import LAYERS

if TYPE_CHECKING:
    from great_expectations.core.expectation_suite import ExpectationSuite

#: The suites shipped with the package (the demo shop's).
PACKAGED_SUITES = Path(__file__).parent / "suites"

#: Expectation types that run inside the streams, compiled to column predicates.
ROW_TYPES = (
    "expect_column_values_to_not_be_null",
    "expect_column_values_to_be_between",
    "expect_column_values_to_be_in_set",
    "expect_column_values_to_not_be_in_set",
    "expect_column_values_to_match_regex",
    "expect_column_value_lengths_to_be_between",
    "expect_column_values_to_be_of_type",
)
#: Expectation types about a whole table: skipped by the streams, run by ``lakehouse validate``.
TABLE_TYPES = (
    "expect_column_values_to_be_unique",
    "expect_compound_columns_to_be_unique",
    "expect_select_column_values_to_be_unique_within_record",
    "expect_table_row_count_to_be_between",
    "expect_table_row_count_to_equal",
    "expect_table_columns_to_match_set",
    "expect_table_columns_to_match_ordered_list",
    "expect_column_to_exist",
    "expect_column_min_to_be_between",
    "expect_column_max_to_be_between",
    "expect_column_sum_to_be_between",
    "expect_column_mean_to_be_between",
    "expect_column_pair_values_a_to_be_greater_than_b",
)


@dataclass(frozen=True)
class Rule:
    """One row-level expectation of a suite: its name, GX type and kwargs, and its action."""

    suite: str  # ``<layer>.<table>``
    name: str
    type: str
    column: str
    kwargs: dict[str, Any]
    action: QualityAction

    @property
    def mostly(self) -> float:
        return float(self.kwargs.get("mostly", 1.0))

    @property
    def qualified(self) -> str:
        """``<layer>.<table>.<name>``, as ``[quality.actions]`` names it."""
        return f"{self.suite}.{self.name}"


@dataclass(frozen=True)
class TableSuite:
    """The expectations of one table's suite: the row-level ones (run in the stream) and the
    number of table-level ones (run by ``lakehouse validate``)."""

    name: str
    path: str
    rules: tuple[Rule, ...]
    table_level: int


def suite_path(quality: QualitySpec, layer: str, table: str) -> Path | None:
    """The file of suite ``<layer>.<table>``: the user's, else the packaged one, else None."""
    require_identifier(table, "table name")
    if layer not in LAYERS:
        raise ConfigError(f"Unknown layer {layer!r}. Must be one of {', '.join(LAYERS)}.")
    roots = [Path(quality.suites)] if quality.suites is not None else []
    if quality.packaged_suites:
        roots.append(PACKAGED_SUITES)
    for root in roots:
        candidate = root / layer / f"{table}.json"
        if candidate.is_file():
            return candidate
    return None


def suite_names(quality: QualitySpec, layer: str) -> list[str]:
    """The tables of ``layer`` that have a suite (a file, or expectations declared beside
    the table)."""
    roots = [Path(quality.suites)] if quality.suites is not None else []
    if quality.packaged_suites:
        roots.append(PACKAGED_SUITES)
    files = {p.stem for root in roots for p in (root / layer).glob("*.json")}
    return sorted(files | {d.table for d in quality.declared if d.layer == layer})


def suite_source(quality: QualitySpec, layer: str, table: str) -> str | None:
    """Where suite ``<layer>.<table>`` is defined, for messages: its file, the expectations
    declared beside the table, or both (None: no suite)."""
    path = suite_path(quality, layer, table)
    declared = f"the expectations declared on {layer} table {table!r}"
    if not quality.declared_for(layer, table):
        return None if path is None else str(path)
    return declared if path is None else f"{path} and {declared}"


def table_suite(quality: QualitySpec, layer: str, table: str) -> ExpectationSuite | None:
    """The GX suite of table ``<layer>.<table>``: its file's expectations, then those declared
    beside the table (None: neither).

    Raises:
        ConfigError: as :func:`_load`, or a declared expectation without a GX form.
    """
    found = _suite(quality, layer, table)
    return None if found is None else found[0]


def _suite(
    quality: QualitySpec, layer: str, table: str
) -> tuple[ExpectationSuite, list[Any]] | None:
    path = suite_path(quality, layer, table)
    declared = quality.declared_for(layer, table)
    if path is None and not declared:
        return None
    name = f"{layer}.{table}"
    if path is None:
        document: dict[str, Any] = {"name": name, "expectations": []}
        where = f"The expectations declared on {layer} table {table!r}"
    else:
        document, where = _document(path, name), f"Suite file {path}"
    if declared:
        extra = DeclaredSuite(layer, table, declared).configurations()
        document = document | {"expectations": [*document.get("expectations", []), *extra]}
    return _load(document, name, where)


def read_suite(path: Path, name: str) -> ExpectationSuite:
    """The GX suite in ``path``, every expectation checked by GX's own models.

    Raises:
        ConfigError: as :func:`_document` and :func:`_load`.
    """
    return _load(_document(path, name), name, f"Suite file {path}")[0]


def _document(path: Path, name: str) -> dict[str, Any]:
    """The JSON object of suite file ``path``.

    Raises:
        ConfigError: the file is not JSON, not an object, or named other than ``name``.
    """
    where = f"Suite file {path}"
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(f"{where} is not valid JSON: {error}.") from None
    if not isinstance(document, dict):
        raise ConfigError(f"{where} must hold a JSON object with 'name' and 'expectations'.")
    if document.get("name") != name:
        raise ConfigError(
            f"{where} is named {document.get('name')!r}: a suite's name must be {name!r} "
            "(<layer>.<table>, as its path says)."
        )
    return document


def _load(document: dict[str, Any], name: str, where: str) -> tuple[ExpectationSuite, list[Any]]:
    """The GX suite of a suite ``document`` and its expectations' configurations as written
    (GX's models turn numbers into floats; the configurations keep a bigint bound exact).

    Raises:
        ConfigError: ``document`` is not a suite, or holds an expectation GX does not know or
            whose arguments GX refuses (``where`` names it).
    """
    from great_expectations.core.expectation_suite import (
        ExpectationSuite,
        expectationSuiteSchema,
    )
    from marshmallow import ValidationError

    try:
        loaded = expectationSuiteSchema.load(document)
    except ValidationError as error:
        raise ConfigError(f"{where} is not a Great Expectations suite: {_first(error)}") from None
    expectations = []
    configurations = loaded.get("expectations", [])
    for number, configuration in enumerate(configurations, 1):
        try:
            expectations.append(configuration.to_domain_obj())
        except Exception as error:  # GX raises pydantic, ValueError and its own errors here
            raise ConfigError(
                f"{where}: expectation {number} ({configuration.type}) is invalid: {_first(error)}"
            ) from None
    suite = ExpectationSuite(
        name=name, expectations=expectations, meta=loaded.get("meta"), notes=loaded.get("notes")
    )
    return suite, list(configurations)


def load_suite(quality: QualitySpec, layer: str, table: str) -> TableSuite | None:
    """The expectations of table ``<layer>.<table>`` with their actions, or None without a
    suite.

    Raises:
        ConfigError: the suite is malformed, has an expectation type the streams cannot run,
            an unknown action, or two expectations of one name.
    """
    found = _suite(quality, layer, table)
    if found is None:
        return None
    name = f"{layer}.{table}"
    _, configurations = found
    rules: list[Rule] = []
    table_level = 0
    for configuration in configurations:
        kind = configuration.type
        if kind in TABLE_TYPES:
            table_level += 1
            continue
        if kind not in ROW_TYPES:
            raise ConfigError(
                f"Suite {name}: expectation type {kind!r} cannot run inside the stream. "
                f"Row-level types: {', '.join(ROW_TYPES)}; table-level types run in "
                f"'lakehouse validate': {', '.join(TABLE_TYPES)}."
            )
        kwargs = dict(configuration.kwargs)
        meta = dict(configuration.meta or {})
        if kwargs.get("row_condition"):
            raise ConfigError(
                f"Suite {name}: {kind} has a row_condition, which the streams do not run; "
                "remove it or move the expectation to a table-level check."
            )
        column = require_identifier(str(kwargs["column"]), f"column of suite {name}")
        rule_name = require_identifier(
            str(meta.get("name") or default_name(kind, column)), f"expectation name in {name}"
        )
        if any(r.name == rule_name for r in rules):
            raise ConfigError(
                f"Suite {name}: two expectations are named {rule_name!r}; give each a "
                'distinct "name" in its meta.'
            )
        qualified = f"{name}.{rule_name}"
        action = quality.action_for(qualified) or require_action(
            meta.get("action", "warn"), f"expectation {qualified} (meta.action)"
        )
        if layer == "gold" and action == "drop":
            raise ConfigError(
                f"Expectation {qualified} has action drop, which a gold table cannot take: its "
                "rows are derived from silver, and withholding one would make gold differ from "
                "its declaration (lakehouse verify). Use warn or fail, or drop the rows at "
                "silver (in the suite of the gold table's silver source)."
            )
        rules.append(Rule(name, rule_name, kind, column, kwargs, action))
    _check_overrides(quality, name, rules)
    source = suite_source(quality, layer, table)
    assert source is not None
    return TableSuite(name, source, tuple(rules), table_level)


def default_name(kind: str, column: str) -> str:
    """``total_be_between`` for ``expect_column_values_to_be_between`` on ``total``."""
    return f"{column}_{kind.removeprefix('expect_column_values_to_').removeprefix('expect_')}"


def check_overrides(quality: QualitySpec) -> None:
    """Raise ConfigError if ``[quality.actions]`` names an expectation no suite has."""
    for qualified, _ in quality.actions:
        layer, _, rest = qualified.partition(".")
        table, _, rule = rest.partition(".")
        if not rule or layer not in LAYERS:
            raise ConfigError(
                f"[quality.actions] key {qualified!r} must be '<layer>.<table>.<expectation>', "
                "e.g. 'silver.orders.total_not_negative'."
            )
        if table not in suite_names(quality, layer):
            raise ConfigError(
                f"[quality.actions] names {qualified!r}, but there is no suite for "
                f"{layer}.{table}. Suites of {layer}: "
                f"{', '.join(suite_names(quality, layer)) or 'none'}."
            )
        load_suite(quality, layer, table)


def _check_overrides(quality: QualitySpec, name: str, rules: list[Rule]) -> None:
    known = {r.name for r in rules}
    for qualified, _ in quality.actions:
        suite, _, rule = qualified.rpartition(".")
        if suite == name and rule not in known:
            raise ConfigError(
                f"[quality.actions] names {qualified!r}, but suite {name} has no row-level "
                f"expectation {rule!r}. It has: {', '.join(sorted(known)) or 'none'}."
            )


def _first(error: Exception) -> str:
    """The first line of an error's text."""
    text = str(error).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " ".join(lines[:3]) if lines else type(error).__name__
