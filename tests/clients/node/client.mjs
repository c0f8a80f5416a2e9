// The official TypeScript SDK (StreamableHTTPClientTransport) running the
// cursor loop, reading samples, listing templates and closing its session.
// usage: node client.mjs URL TOKEN [URI ...]   (prints one JSON object)
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, token, ...reads] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: token ? { headers: { Authorization: `Bearer ${token}` } } : undefined,
});
const client = new Client({ name: 'emseepea-ts-e2e', version: '1.0.0' });
await client.connect(transport);
const out = { protocol: transport.protocolVersion, session: transport.sessionId, uris: [], pages: 0, reads: {} };
let cursor;
do {
  const page = await client.listResources(cursor ? { cursor } : undefined);
  out.pages += 1;
  out.uris.push(...page.resources.map((r) => r.uri));
  cursor = page.nextCursor;
} while (cursor !== undefined);
out.templates = (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
for (const uri of reads) {
  const c = (await client.readResource({ uri })).contents[0];
  out.reads[uri] = 'text' in c ? c.text : { blob: c.blob };
}
try {
  await client.readResource({ uri: 'nothing://here' });
  out.missing = null;
} catch (e) {
  out.missing = e.code;
}
await transport.terminateSession();
await client.close();
console.log(JSON.stringify(out));
