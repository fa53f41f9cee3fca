"""Pattern declarations: ``[[patterns]]`` entries and the Python dataclasses, validated at
load with one line per mistake."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse_core.config import PipelineConfig, load_config
from lakehouse_core.errors import ConfigError
from lakehouse_core.gold_tables import GoldTable, Measure, Window
from lakehouse_core.patterns import (
    Absent,
    Pattern,
    PatternMeasure,
    Step,
    match_id,
    pattern_to_mapping,
    times_range,
)
from tests.cli import run_cli

pytestmark = pytest.mark.unit

ENTRY = """
[[patterns]]
name = "two_countries"
source = "card_uses"
partition_by = ["card_id"]
event_time = "used_at"
within = "1 hour"
steps = [{steps}]
{extra}
"""
GOOD_STEPS = (
    '{ name = "first_use" }, { name = "elsewhere", condition = "country <> first_use.country" }'
)


def toml(tmp_path: Path, steps: str = GOOD_STEPS, extra: str = "") -> Path:
    path = tmp_path / "pipeline.toml"
    path.write_text(ENTRY.format(steps=steps, extra=extra), encoding="utf-8")
    return path


def test_a_patterns_entry_is_the_same_declaration_as_from_python(tmp_path: Path) -> None:
    extra = (
        'measures = [{ name = "home", fn = "first", step = "first_use", column = "country" }]\n'
        'after_match = "skip_to_next"\nalert = true\nwatermark_delay = "1 minute"'
    )
    loaded = load_config(toml(tmp_path, extra=extra)).patterns
    assert loaded == (
        Pattern(
            name="two_countries",
            source="card_uses",
            event_time="used_at",
            partition_by=("card_id",),
            within="1 hour",
            steps=(Step("first_use"), Step("elsewhere", "country <> first_use.country")),
            measures=(PatternMeasure("home", "first", "country", "first_use"),),
            after_match="skip_to_next",
            alert=True,
            watermark_delay="1 minute",
        ),
    )
    assert loaded[0].reads == ("card_id", "used_at", "country")


@pytest.mark.parametrize(
    ("times", "expected"),
    [
        (1, (1, 1)),
        (3, (3, 3)),
        ("3", (3, 3)),
        ("1+", (1, None)),
        ("2..5", (2, 5)),
        ("?", (0, 1)),
        ("*", (0, None)),
        ("0..2", (0, 2)),
        ("0+", (0, None)),
    ],
)
def test_times(times: object, expected: tuple[int, int | None]) -> None:
    assert times_range(times, "step") == expected


MISTAKES = [
    ('{ name = "a", times = "0..0" }', "", "maximum must be at least 1"),
    ('{ name = "a", times = 0 }', "", "maximum must be at least 1"),
    ('{ name = "a", times = "?" }, { name = "b", times = "*" }', "", "make one step required"),
    ('{ name = "a", times = "??" }', "", 'or an optional step ("?", "*", "0..2")'),
    ('{ name = "a", contiguity = "next" }', "", "Invalid contiguity 'next' for step 'a'"),
    (GOOD_STEPS, 'contiguity = "loose"', "use relaxed or strict"),
    ('{ name = "a", times = "3..2" }', "", "at least 1 and at least the minimum"),
    ('{ name = "a", times = "many" }', "", "Invalid times 'many'"),
    ('{ name = "a" }, { name = "a" }', "", "repeated: a"),
    ('{ name = "a", condition = "x = b.x" }, { name = "b" }', "", "does not come before it"),
    ('{ name = "a", condition = "x = a.x" }', "", "does not come before it"),
    ('{ name = "a", condition = "x = nowhere.x" }', "", "reads step 'nowhere', which the"),
    ('{ name = "a", condition = "x IN (SELECT 1)" }', "", "Unsupported condition"),
    ('{ name = "a", colour = "red" }', "", "Unknown setting(s) colour"),
    ("", "", "has no steps"),
    (GOOD_STEPS, 'after_match = "skip_somewhere"', "Invalid after_match"),
    (GOOD_STEPS, 'measures = [{ name = "m", fn = "median", column = "x" }]', "Unknown function"),
    (GOOD_STEPS, 'measures = [{ name = "m", fn = "sum" }]', "needs a column"),
    (GOOD_STEPS, 'measures = [{ name = "m", fn = "max", column = "x", step = "z" }]', "step 'z'"),
    (GOOD_STEPS, 'measures = [{ name = "match_id", fn = "count" }]', "twice"),
    (GOOD_STEPS, 'absent = { condition = "x = 1" }', "needs condition and within"),
    (
        GOOD_STEPS,
        'absent = { condition = "x = 1", within = "soon" }',
        "absent.within 'soon' is not",
    ),
    (GOOD_STEPS, "alert = 1", "true or false"),
    (GOOD_STEPS, 'watermark_delay = "-1 hour"', "watermark_delay '-1 hour' is not a duration"),
    (GOOD_STEPS, "schedule = 1", "Unknown setting(s) schedule"),
]


@pytest.mark.parametrize(("steps", "extra", "expected"), MISTAKES)
def test_one_clear_error_per_mistake(tmp_path: Path, steps: str, extra: str, expected: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(toml(tmp_path, steps, extra))
    message = str(raised.value)
    assert expected in message and "\n" not in message, message


WARM = '{ name = "cold", condition = "temp < 0" }, { name = "hot", condition = "%s" }'


@pytest.mark.parametrize(
    ("steps", "extra", "message"),
    [
        (
            WARM % "temp > warm.temp",
            "",
            "Pattern 'two_countries' step 'hot': 'warm.temp' reads step 'warm', which the "
            "pattern does not declare before it; its steps are cold, hot.",
        ),
        (
            WARM % "temp > cold.temp",
            'absent = { condition = "temp > `warm`.temp", within = "5 min" }',
            "Pattern 'two_countries' absent: 'warm.temp' reads step 'warm', which the pattern "
            "does not declare; its steps are cold, hot.",
        ),
    ],
    ids=["step", "absent"],
)
def test_a_step_not_declared_is_named_with_the_steps_there_are(
    tmp_path: Path, steps: str, extra: str, message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(toml(tmp_path, steps, extra))
    assert str(raised.value) == message


def test_the_command_line_says_it_in_one_line(tmp_path: Path) -> None:
    path = toml(tmp_path, '{ name = "a", times = "3..2" }')
    result = run_cli(
        "run", "--source", f"files:{tmp_path}", "--warehouse", tmp_path / "w", "--config", path
    )
    assert result.returncode != 0
    assert "at least 1 and at least the minimum" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_a_pattern_may_not_take_a_gold_name() -> None:
    gold = GoldTable(
        "busy", "orders", "created_at", Window("tumbling", size="1 hour"), (Measure("n", "count"),)
    )
    pattern = Pattern("busy", "orders", "created_at", (Step("a"),), "1 hour")
    with pytest.raises(ConfigError, match=r"gold\.busy, which is a gold declaration"):
        PipelineConfig(gold_tables=(gold,), patterns=(pattern,))
    with pytest.raises(ConfigError, match="late_events"):
        PipelineConfig(
            patterns=(Pattern("late_events", "orders", "created_at", (Step("a"),), "1 hour"),)
        )


def test_absent_keeps_its_window() -> None:
    pattern = Pattern(
        "carts",
        "clicks",
        "ts",
        (Step("cart", "action = 'add'"),),
        "10 minutes",
        absent=Absent("action = 'buy'", "30 minutes"),
    )
    assert pattern.reach_micros == 40 * 60_000_000


def test_contiguity_per_pattern_and_per_step(tmp_path: Path) -> None:
    steps = '{ name = "a", times = "2+" }, { name = "b", contiguity = "relaxed" }'
    (loaded,) = load_config(toml(tmp_path, steps, 'contiguity = "strict"')).patterns
    assert loaded.contiguity == "strict" and loaded.strict == (True, False)
    assert loaded.steps[1] == Step("b", contiguity="relaxed")
    (default,) = load_config(toml(tmp_path)).patterns
    assert default.contiguity == "relaxed" and default.strict == (False, False)
    assert "contiguity" not in pattern_to_mapping(default)
    assert pattern_to_mapping(loaded)["contiguity"] == "strict"


@pytest.mark.parametrize("times", ["3+", "2..5"])
def test_a_looping_last_step_may_have_absent(tmp_path: Path, times: str) -> None:
    # Flink CEP's oneOrMore().notFollowedBy(...): the window starts at the step's last event.
    steps = f"""{{ name = "failed", condition = "status = 'failed'", times = "{times}" }}"""
    extra = """absent = { condition = "status = 'ok'", within = "5 minutes" }"""
    (loaded,) = load_config(toml(tmp_path, steps, extra)).patterns
    assert loaded.steps[-1].times == times and loaded.absent is not None
    assert loaded.reach_micros == 65 * 60_000_000


def test_match_ids_are_stable_and_tell_keys_apart() -> None:
    first = match_id([1], [10])
    assert first == match_id([1], [10]) and len(first) == 32
    assert (
        len(
            {
                first,
                match_id([1], [11]),
                match_id([2], [10]),
                match_id(["1"], [10]),
                match_id([None], [10]),
            }
        )
        == 5
    )


def test_a_model_reads_a_pattern_but_may_not_take_its_name(tmp_path: Path) -> None:
    model = (
        '[[models]]\nname = "{name}"\n'
        'sql = "SELECT card_id, count(*) AS n FROM gold.two_countries GROUP BY card_id"\n'
    )
    path = toml(tmp_path, extra=model.format(name="per_card"))
    assert [m.name for m in load_config(path).models] == ["per_card"]
    with pytest.raises(ConfigError, match="a pattern"):
        load_config(toml(tmp_path, extra=model.format(name="two_countries")))
