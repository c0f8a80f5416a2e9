"""python-notes: each caller lists and reads only their own notes, from a
granted SQL database, in Python (built with componentize-py). This file
is the README's "Writing a guest" Python example, verbatim.

Like the Rust `documents` guest: `list` runs one bounded, ordered query with
limit + 1 rows (sdk.fetch) and sdk.page to decide has_more, and `read` re-checks ownership.
It lists through `inventory-json` (world inventory-source-json): the page goes to
the host as UTF-8 JSON bytes (sdk.json_page), encoded in C, not object by object.
"""
from typing import List, Optional

import emseepea_guest as sdk  # this repository's sdk/python
from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import config, sql
from wit_world.imports.types import (
    Access, CallContext, ResourceBody_Text, ResourceContents, SourceError_Failed, SourceError_NotFound,
    SourceError_Unavailable, Template as TemplateDef,
)

PREFIX = "notes://notes/"


def owner(context: CallContext) -> str:
    # Never fall back to an unrestricted query when the user is unknown.
    return sdk.require_subject(context, lambda: Err(SourceError_Failed("A verified user is required")))


def query(statement: str, params: list, max_rows: int) -> sql.Rows:
    try:
        return sql.Connection.open(config.get("database") or "notes").query(statement, params, max_rows)
    except Err as e:
        raise Err(SourceError_Unavailable(f"query: {e.value}"))


class Template(exports.Template):
    def describe(self) -> TemplateDef:
        return TemplateDef(name="python-notes", uri_template=PREFIX + "{id}", title="Notes",
                           description="The signed-in user's notes (a Python guest)", mime_type="text/plain",
                           access=Access.PROTECTED, required_scopes=["notes:read"], discoverable=True)

    def read(self, uri: str, context: CallContext) -> List[ResourceContents]:
        user = owner(context)
        if not uri.startswith(PREFIX):
            raise Err(SourceError_NotFound())
        rows = query("SELECT body FROM notes WHERE id = ?1 AND owner = ?2",
                     [sql.Value_Text(uri[len(PREFIX):]), sql.Value_Text(user)], 1)
        if not rows.rows:
            raise Err(SourceError_NotFound())
        return [ResourceContents(uri=uri, mime_type="text/plain", body=ResourceBody_Text(rows.rows[0][0].value))]


class InventoryJson(exports.InventoryJson):
    def list(self, after: Optional[str], limit: int, context: CallContext) -> bytes:
        user = owner(context)
        rows = query("SELECT sort_key, id, title FROM notes WHERE owner = ?1 AND sort_key > ?2 ORDER BY sort_key LIMIT ?3",
                     [sql.Value_Text(user), sql.Value_Text(after or ""), sql.Value_Integer(sdk.fetch(limit))],
                     sdk.fetch(limit))
        entries, has_more = sdk.page((sdk.entry(r[0].value, PREFIX + r[1].value, r[2].value, "text/plain")
                                      for r in rows.rows), limit)
        return sdk.json_page(entries, has_more)
