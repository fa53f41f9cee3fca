"""The loader (:mod:`lakehouse_core.loader`) against documents of the wrong shape: from valid
pipeline documents, hypothesis changes the type of a random setting at any depth (string, list,
integer, float, bool, table), adds unknown settings to random tables, or removes required
settings, and writes the document as TOML text. Every such document either loads or raises
one ConfigError line that names the bad setting; never another exception. No Spark."""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse_core.config import config_from_mapping, config_from_toml
from lakehouse_core.errors import ConfigError
from lakehouse_core.loader import DocumentShape, Shape, nested_shape

pytestmark = pytest.mark.unit

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

RICH = """
[[tables]]
name = "orders"
topic = "shop.public.orders"
keys = ["id"]
sequence_by = "lsn"
stored_as_scd_type = 2
track_history_column_list = ["status"]
apply_as_deletes = "status = 'deleted'"
except_column_list = ["secret"]
ignore_null_updates = true
tombstone_retention_days = 3
deletion_vectors = true

[[tables]]
name = "clicks"
topic = "shop.clicks"
format = "events"
keys = "event_id"
sequence_by = ["ts"]
schema = "event_id string, user_id bigint, page string, ts timestamp"

[[tables]]
name = "customers"
topic = "shop.public.customers"

[[gold]]
name = "revenue"
source = "orders"
event_time = "created_at"
group_by = ["tier"]
filter = "total > 0"
watermark_delay = "5m"
window = { kind = "hopping", size = "10 minutes", slide = "5 minutes", start_as = "s" }
columns = { total_eur = "total * 0.9" }
join = { entity = "customers", on = { customer_id = "id" }, columns = ["tier"], as_of = "current" }
top_n = { n = 3, order_by = "revenue DESC", partition_by = ["tier"] }
measures = [
  { name = "revenue", fn = "sum", column = "total_eur", filter = "total > 1" },
  { name = "p90", fn = "approx_percentile", column = "total", percentile = 0.9 },
  { name = "top", fn = "max_by", column = "customer_id", by = "total" },
]

[[gold]]
name = "every_ten"
source = "clicks"
event_time = "ts"
window = { kind = "count", count = 10 }
measures = [{ name = "pages", fn = "count_distinct", column = "page" }]

[[gold]]
name = "with_clicks"
source = "orders"
event_time = "created_at"
group_by = ["customer_id"]
measures = [{ name = "clicks", fn = "count" }]
[gold.stream_join]
source = "clicks"
on = { customer_id = "user_id" }
event_time = "ts"
within = "1h"

[[patterns]]
name = "carts"
source = "clicks"
event_time = "ts"
partition_by = ["user_id"]
within = "30 minutes"
after_match = "skip_to_next"
alert = true
steps = [{ name = "view", condition = "page = 'cart'", times = 1 }, { name = "again", times = "2" }]
absent = { condition = "page = 'checkout'", within = "30 minutes" }
measures = [{ name = "first_page", fn = "first", step = "view", column = "page" }]

[[alerts]]
name = "big"
source = "orders"
key = "customer_id"
value = "total"
event_time = "created_at"
threshold = 5
min_history = 3

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

DOCUMENTS = [tomllib.loads(RICH), tomllib.loads((EXAMPLES / "shop.toml").read_text())]

#: A value of each TOML type; a mutation replaces a value by one of another type.
VALUES: list[Any] = ["mutated", 7, 7.5, True, ["mutated"], [7], {"mutated": 7}, [{"x": 7}]]

Path_ = tuple[str | int, ...]


def _paths(node: Any, shape: type[Shape] | None, path: Path_ = ()) -> list[tuple[Path_, Any]]:
    """Every (path, shape of the table holding it or None) of the document's values."""
    found: list[tuple[Path_, Any]] = []
    if isinstance(node, Mapping):
        for key, value in node.items():
            nested = nested_shape(shape, key) if shape is not None else None
            found.append(((*path, key), shape))
            found += _paths(value, nested, (*path, key))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            found.append(((*path, index), shape))
            found += _paths(item, shape, (*path, index))
    return found


def _tables(node: Any, shape: type[Shape] | None, path: Path_ = ()) -> list[tuple[Path_, Any]]:
    """Every (path, shape) of a table of the document (shape None: a free-form table)."""
    found: list[tuple[Path_, Any]] = []
    if isinstance(node, Mapping):
        found.append((path, shape))
        for key, value in node.items():
            nested = nested_shape(shape, key) if shape is not None else None
            found += _tables(value, nested, (*path, key))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            found += _tables(item, shape, (*path, index))
    return found


def _at(document: Any, path: Path_) -> Any:
    for segment in path:
        document = document[segment]
    return document


def _named(path: Path_) -> list[str]:
    """The names a message may give a bad value at ``path``: its key, or the setting that
    holds it (a list's item, an entry of a table of names such as ``columns`` or ``on``)."""
    keys = [segment for segment in path if isinstance(segment, str)]
    return keys[-2:]


@st.composite
def mutated(draw: st.DrawFn) -> tuple[dict[str, Any], list[str], str]:
    """A document with one mistake: (document, names its message may give, what was done)."""
    document = copy.deepcopy(draw(st.sampled_from(DOCUMENTS)))
    kind = draw(st.sampled_from(("type", "unknown", "remove")))
    if kind == "type":
        path, _ = draw(st.sampled_from(_paths(document, DocumentShape)))
        old = _at(document, path)
        new = draw(st.sampled_from([v for v in VALUES if type(v) is not type(old)]))
        _at(document, path[:-1])[path[-1]] = new
        return document, _named(path), f"{path} = {new!r}"
    if kind == "unknown":
        path, _ = draw(st.sampled_from(_tables(document, DocumentShape)))
        value = draw(st.sampled_from(VALUES))
        _at(document, path)["colour"] = value
        return document, _named((*path, "colour")), f"{path}.colour = {value!r}"
    required = [
        (path, shape)
        for path, shape in _paths(document, DocumentShape)
        if shape is not None
        and isinstance(path[-1], str)
        and any(
            (field.alias or name) == path[-1] and field.is_required()
            for name, field in shape.model_fields.items()
        )
    ]
    path, _ = draw(st.sampled_from(required))
    del _at(document, path[:-1])[path[-1]]
    return document, _named(path), f"without {path}"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_a_document_of_the_wrong_shape_is_one_line_naming_the_setting(
    case: tuple[dict[str, Any], list[str], str],
) -> None:
    document, names, done = case
    try:
        config_from_toml(tomli_w.dumps(document))
    except ConfigError as error:
        message = str(error)
        assert "\n" not in message, (done, message)
        assert any(name.rstrip("s") in message for name in names), (done, message)


def test_the_documents_load_unmutated() -> None:
    for document in DOCUMENTS:
        config_from_mapping(document)
