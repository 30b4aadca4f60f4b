"""`rocketport admin --output`: what each format prints, without a broker."""

from __future__ import annotations

import io

import orjson
from rich.console import Console

from rocketport.admin import Report, output_format

OFFSET_ID = "7F00000100002A9F00000000000001B4"
UNIQ_ID = "7F000001233E3669E1907DE62EFA0000"
COLUMNS = ("brokerName", "broker", "queueId", "queueOffset", "msgId", "offsetMsgId", "status")
ROW = ("broker-a", "127.0.0.1:10911", 3, 17, UNIQ_ID, OFFSET_ID, "SEND_OK")


def console(width: int = 80, terminal: bool = False) -> Console:
    return Console(file=io.StringIO(), width=width, force_terminal=terminal, color_system=None)


def emitted(fmt: str, fill, width: int = 80, terminal: bool = False) -> tuple[str, str]:
    out, err = console(width, terminal), console(width)
    report = Report(fmt, out, err)
    fill(report)
    report.emit()
    return out.file.getvalue(), err.file.getvalue()


def test_default_is_plain_when_not_a_terminal_and_table_at_one():
    assert output_format(None, console()) == "plain"
    assert output_format(None, console(terminal=True)) == "table"
    assert output_format("json", console(terminal=True)) == "json"


def test_table_at_an_80_column_terminal_keeps_ids_whole():
    for fill in (lambda r: r.rows("sent", COLUMNS, [ROW, ROW]), lambda r: r.record("sent", dict(zip(COLUMNS, ROW)))):
        text, _ = emitted("table", fill, width=80, terminal=True)
        assert OFFSET_ID in text and UNIQ_ID in text and "127.0.0.1:10911" in text, text
        assert "…" not in text
        assert max(map(len, text.splitlines())) <= 80, text


def test_table_that_fits_stays_a_table():
    text, _ = emitted("table", lambda r: r.rows("queues", ("queueId", "offset"), [(0, 5), (1, 7)]),
                      terminal=True)
    assert "queueId" in text.splitlines()[1] and "offset" in text.splitlines()[1], text


def test_plain_is_tab_separated_with_a_header_and_never_truncated():
    body = "x" * 500 + "\tafter tab\nnext line"
    text, _ = emitted("plain", lambda r: r.rows("messages", ("offsetMsgId", "body"), [(OFFSET_ID, body)]),
                      width=40)
    header, row = text.splitlines()
    assert header == "offsetMsgId\tbody"
    assert row == OFFSET_ID + "\t" + "x" * 500 + "\\tafter tab\\nnext line"


def test_plain_sections_and_totals_are_blocks_with_their_own_header():
    def fill(r: Report) -> None:
        r.rows("progress", ("queueId", "diff"), [(0, 2), (1, 1)])
        r.total("diffTotal", 3, "Diff Total")
    text, _ = emitted("plain", fill)
    assert text == "queueId\tdiff\n0\t2\n1\t1\n\ndiffTotal\n3\n"


def test_json_shapes():
    text, _ = emitted("json", lambda r: r.rows("sent", COLUMNS, [ROW]))
    assert orjson.loads(text) == [dict(zip(COLUMNS, ROW))]
    text, _ = emitted("json", lambda r: r.record("sent", dict(zip(COLUMNS, ROW))))
    assert orjson.loads(text)["offsetMsgId"] == OFFSET_ID and orjson.loads(text)["queueOffset"] == 17

    def fill(r: Report) -> None:
        r.rows("progress", ("queueId", "diff"), [(0, 2)])
        r.total("diffTotal", 2, "Diff Total")
    text, _ = emitted("json", fill)
    assert orjson.loads(text) == {"progress": [{"queueId": 0, "diff": 2}], "diffTotal": 2}
    text, _ = emitted("json", lambda r: r.rows("topics", ("topic",)))  # no rows: still the same shape
    assert orjson.loads(text) == []


def test_remarks_leave_stdout_parseable_unless_tables_are_printed():
    def fill(r: Report) -> None:
        r.rows("producers", ("clientId",), [("c1",)])
        r.note("127.0.0.1:10911: group G not online")
    for fmt in ("json", "plain"):
        out, err = emitted(fmt, fill)
        assert "not online" in err and "not online" not in out
    out, _ = emitted("table", fill)
    assert "not online" in out


def test_table_cells_are_not_markup():
    text, _ = emitted("table", lambda r: r.rows("messages", ("body",), [("[bold]x[/bold] [red]",)]),
                      width=120)
    assert "[bold]x[/bold] [red]" in text
