"""docs/remote.md says the schema's version and lists its tables as the code has them
(issue 38: it said version 4 when the code had 5, and left out fd_starts)."""

from __future__ import annotations

import re
from pathlib import Path

from flowdrop_tui.core.remote import shared_pins
from flowdrop_tui.core.remote.postgres import schema, shared_files

DOC = Path(__file__).resolve().parents[2] / "docs" / "remote.md"
TABLE = re.compile(r"CREATE TABLE IF NOT EXISTS (\w+)")


def test_the_docs_name_the_schema_version_and_every_table() -> None:
    text = DOC.read_text()
    assert f"`fd_schema.version`, now {schema.SCHEMA_VERSION})" in text
    tables = set(TABLE.findall(schema.SCHEMA + shared_files.SCHEMA + shared_pins.SCHEMA))
    tables.discard("fd_schema")  # the version itself, said above
    listed = set(re.findall(r"^\| `(fd_\w+)\(", text, re.MULTILINE))
    assert listed == tables, (sorted(listed - tables), sorted(tables - listed))
