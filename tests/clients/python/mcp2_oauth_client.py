"""The Python SDK 2.x signing in for real (tests/oauth_flow.rs): no token at
first, then OAuthClientProvider does 401 -> protected-resource metadata ->
authorization-server metadata -> dynamic registration -> authorization code +
PKCE with `resource` -> token, against the test authorization server
(tests/oauth/as.mjs). The redirect handler plays the user: it opens the
authorization URL, signs in on the login form and stops at the redirect back
to the client with the code (consent is given by the test server).

usage: mcp2_oauth_client.py URL --as AS_URL [--login NAME] [--steps a,b,...] [--other URL]
Steps (in one client session, in the order given):
  signin   traverse resources/list to its end and read a catalog item
  stepup   read hostile://ctx/1, whose source needs notes:read (403 -> step-up)
  whoami   read hostile://ctx/1 (the principal the guest sees)
  expiry   list page 1, let the access token expire, finish the traversal
  rotate   the server rotates its signing key: a new-key token, then the old
           key is retired and the old token polled until refused
  audience the same stored token presented to another server (--other)
Prints one JSON object with what each step saw.
"""
import argparse
import asyncio
import base64
import json
import time
from urllib.parse import parse_qs, urlencode, urljoin, urlparse

import httpx2
from mcp import Client, MCPError
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp2_connect import MemoryStorage
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

REDIRECT = "http://127.0.0.1:1/callback"


class User:
    """The person at the browser: signs in as `login` wherever the
    authorization URL leads, and hands the code back to the SDK."""

    def __init__(self, login: str):
        self.login = login
        self.result: AuthorizationCodeResult | None = None
        self.authorizations: list[dict] = []

    async def redirect_handler(self, url: str) -> None:
        query = parse_qs(urlparse(url).query)
        self.authorizations.append({k: v[0] for k, v in query.items() if k in ("resource", "scope", "code_challenge_method")})
        async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as browser:
            for _ in range(12):
                if url.startswith(REDIRECT):
                    q = {k: v[0] for k, v in parse_qs(urlparse(url).query).items()}
                    if "error" in q:
                        raise RuntimeError(f"authorization refused: {q}")
                    self.result = AuthorizationCodeResult(code=q["code"], state=q.get("state"), iss=q.get("iss"))
                    return
                r = await browser.get(url)
                if r.status_code == 200 and "<form" in r.text:
                    action = urljoin(url, r.text.split('action="', 1)[1].split('"', 1)[0])
                    r = await browser.post(action, data={"login": self.login})
                if r.status_code not in (302, 303):
                    raise RuntimeError(f"{r.status_code} at {url}: {r.text[:300]}")
                url = urljoin(url, r.headers["location"])
        raise RuntimeError("too many redirects")

    async def callback_handler(self) -> AuthorizationCodeResult:
        result, self.result = self.result, None
        return result


def kid_of(token: str) -> str | None:
    try:
        head = token.split(".")[0]
        return json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4))).get("kid")
    except Exception:
        return None  # opaque


async def raw_list(url: str, token: str) -> dict:
    """A bare 2026-07-28 resources/list with exactly this token."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    async with httpx2.AsyncClient(timeout=30) as c:
        r = await c.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "resources/list", "params": {"_meta": meta}},
                         headers={"authorization": f"Bearer {token}", "mcp-protocol-version": "2026-07-28",
                                  "mcp-method": "resources/list", "accept": "application/json, text/event-stream"})
        return {"status": r.status_code, "www_authenticate": r.headers.get("www-authenticate")}


async def admin(as_url: str, path: str, body: dict | None = None) -> dict:
    async with httpx2.AsyncClient(timeout=30) as c:
        r = await c.post(f"{as_url}/admin/{path}", json=body or {})
        r.raise_for_status()
        return r.json()


class Session:
    def __init__(self, url: str, storage: MemoryStorage, user: User, seen: list):
        self.url = url
        self.provider = OAuthClientProvider(
            server_url=url,
            client_metadata=OAuthClientMetadata(redirect_uris=[REDIRECT], client_name="emseepea-py-oauth-test",
                                                grant_types=["authorization_code", "refresh_token"]),
            storage=storage,
            redirect_handler=user.redirect_handler,
            callback_handler=user.callback_handler,
        )
        self.seen = seen

    async def __aenter__(self):
        async def record(resp: httpx2.Response) -> None:
            req = resp.request
            entry = {"method": req.method, "url": str(req.url).split("?")[0], "status": resp.status_code}
            if resp.headers.get("www-authenticate"):
                entry["www_authenticate"] = resp.headers["www-authenticate"]
            if req.method == "POST" and req.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
                form = {k: v[0] for k, v in parse_qs(req.content.decode()).items()}
                entry["form"] = {k: form[k] for k in ("grant_type", "resource", "scope") if k in form}
            self.seen.append(entry)

        async def sending(req: httpx2.Request) -> None:
            # On stderr, so a failure shows the request it happened on.
            import sys
            print(f"sending {req.method} {str(req.url).split('?')[0]}", file=sys.stderr)

        self.http = httpx2.AsyncClient(auth=self.provider, event_hooks={"request": [sending], "response": [record]},
                                       timeout=30)
        await self.http.__aenter__()
        self.client_cm = Client(streamable_http_client(self.url, http_client=self.http), mode="auto", cache=None,
                                read_timeout_seconds=30)
        self.client = await self.client_cm.__aenter__()
        return self

    async def __aexit__(self, *exc):
        await self.client_cm.__aexit__(*exc)
        await self.http.__aexit__(*exc)

    def token(self) -> str:
        return self.provider.context.current_tokens.access_token

    async def traverse(self, between=None) -> dict:
        uris, pages, cursor = [], 0, None
        while True:
            page = await self.client.list_resources(cursor=cursor)
            pages += 1
            uris += [str(r.uri) for r in page.resources]
            if page.next_cursor is None:
                return {"uris": uris, "pages": pages}
            cursor = page.next_cursor
            if between and pages == 1:
                await between()

    async def read(self, uri: str) -> str:
        return (await self.client.read_resource(uri)).contents[0].text


async def main(args) -> dict:
    seen: list = []
    out: dict = {"steps": {}}
    storage = MemoryStorage()
    user = User(args.login)
    async with Session(args.url, storage, user, seen) as s:
        for step in args.steps.split(","):
            start, asked = len(seen), len(user.authorizations)
            r: dict = {}
            if step == "signin":
                r.update(await s.traverse())
                r["read"] = await s.read("catalog://catalog/items/0000000001")
            elif step in ("stepup", "whoami"):
                r["principal"] = json.loads(await s.read("hostile://ctx/1"))["principal"]
            elif step == "expiry":
                token = s.token()

                async def wait_for_expiry():
                    # The server stops issuing short tokens, and this one lapses.
                    await admin(args.auth_server, "settings", {"ttl": 600})
                    await asyncio.sleep(max(0.0, s.provider.context.token_expiry_time - time.time()) + 1.5)
                    r["old_token_now"] = await raw_list(args.url, token)

                r.update(await s.traverse(between=wait_for_expiry))
                r["token_changed"] = s.token() != token
            elif step == "rotate":
                old = s.token()
                r["old_kid"] = kid_of(old)
                r["rotated"] = await admin(args.auth_server, "rotate")
                # The client renews its token (the SDK refreshes a token its
                # clock says has lapsed; here the test makes it lapse now).
                s.provider.context.token_expiry_time = time.time() - 1
                r["new_first_page"] = (await s.client.list_resources()).resources[0].uri.__str__()
                r["new_kid"] = kid_of(s.token())
                r["old_before_retire"] = await raw_list(args.url, old)
                r["retired"] = await admin(args.auth_server, "retire")
                polls = 0
                while polls < 600:
                    polls += 1
                    got = await raw_list(args.url, old)
                    if got["status"] != 200:
                        break
                    await asyncio.sleep(0.1)
                r["old_after_retire"] = got
                r["polls"] = polls
                r["new_after_retire"] = await raw_list(args.url, s.token())
            elif step == "audience":
                # Another MCP server trusting the same authorization server:
                # the client's stored token (for this server) is presented there.
                async with Session(args.other, storage, user, seen) as other:
                    r.update(await other.traverse())
                    r["token_changed"] = other.token() != s.token()
            else:
                raise SystemExit(f"unknown step {step}")
            r["seen"] = seen[start:]
            r["authorizations"] = user.authorizations[asked:]
            out["steps"][step] = r
        # The last access token, for the test to present elsewhere.
        out["token"] = s.token()
    out["authorizations"] = user.authorizations
    out["client_id"] = storage.client_info.client_id if storage.client_info else None
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("--as", dest="auth_server", required=True)
    p.add_argument("--login", default="alice")
    p.add_argument("--steps", default="signin")
    p.add_argument("--other")
    print(json.dumps(asyncio.run(main(p.parse_args()))))
