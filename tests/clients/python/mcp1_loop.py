"""The cursor loop of the mcp 1.x test clients (HTTP and stdio), on an
initialized `ClientSession`: list page after page until nextCursor is None,
list the templates, read each URI asked, and read a URI that does not exist.
A refused listing or read is recorded (code and message), not raised, so
the tests see what the server answered.
"""
from mcp import McpError
from mcp.types import TextResourceContents


async def cursor_loop(session, reads) -> dict:
    out = {"uris": [], "pages": 0, "reads": {}}
    cursor = None
    while True:
        try:
            page = await session.list_resources(cursor=cursor)
        except McpError as e:
            out["list_error"] = {"code": e.error.code, "message": e.error.message}
            break
        out["pages"] += 1
        out["uris"] += [str(r.uri) for r in page.resources]
        if page.nextCursor is None:
            break
        cursor = page.nextCursor
    templates = await session.list_resource_templates()
    out["templates"] = [t.uriTemplate for t in templates.resourceTemplates]
    for uri in reads:
        try:
            res = await session.read_resource(uri)
        except McpError as e:
            out["reads"][uri] = {"error": e.error.code, "message": e.error.message}
            continue
        c = res.contents[0]
        out["reads"][uri] = c.text if isinstance(c, TextResourceContents) else {"blob": c.blob}
    try:
        await session.read_resource("nothing://here")
        out["missing"] = None
    except McpError as e:
        out["missing"] = e.error.code
    return out
