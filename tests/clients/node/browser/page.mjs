// The test page's script, bundled for the browser by esbuild: the
// TypeScript SDK's client (StreamableHTTPClientTransport over fetch) runs
// the cursor loop and a read with a bearer token. Parameters come in the
// URL fragment as JSON {url, token, read}; the outcome goes to window.RESULT.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

async function run() {
  const { url, token, read } = JSON.parse(decodeURIComponent(location.hash.slice(1)));
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: 'emseepea-browser-e2e', version: '1.0.0' });
  await client.connect(transport);
  const out = { origin: location.origin, session: transport.sessionId, uris: [], pages: 0 };
  let cursor;
  do {
    const page = await client.listResources(cursor ? { cursor } : undefined);
    out.pages += 1;
    out.uris.push(...page.resources.map((r) => r.uri));
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  const c = (await client.readResource({ uri: read })).contents[0];
  out.read = c.text;
  await transport.terminateSession();
  await client.close();
  return out;
}

run().then(
  (out) => { window.RESULT = { ok: true, out }; },
  (e) => { window.RESULT = { ok: false, error: String(e && e.message ? e.message : e) }; },
);
