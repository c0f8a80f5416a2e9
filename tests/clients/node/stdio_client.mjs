// The official TypeScript SDK over stdio: StdioClientTransport spawns the
// server from a client configuration ({"command", "args", "env"}), runs the
// cursor loop, lists templates and reads.
// usage: node stdio_client.mjs CONFIG_JSON [URI ...]   (prints one JSON object)
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';

const [config, ...reads] = process.argv.slice(2);
const server = JSON.parse(config);
const transport = new StdioClientTransport({
  command: server.command,
  args: server.args,
  env: { ...getDefaultEnvironment(), ...process.env, ...(server.env ?? {}) },
  stderr: 'inherit',
});
const client = new Client({ name: 'emseepea-ts-stdio-e2e', version: '1.0.0' });
await client.connect(transport);
const out = { protocol: client.getServerVersion() ? 'initialized' : null, uris: [], pages: 0, reads: {} };
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
await client.close();
console.log(JSON.stringify(out));
