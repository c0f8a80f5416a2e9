// The TypeScript SDK signing in for real (tests/oauth_flow.rs): a
// StreamableHTTPClientTransport with an authProvider and no token at first,
// against the test authorization server (tests/oauth/as.mjs). The provider's
// redirectToAuthorization plays the user: it opens the authorization URL,
// signs in on the login form, and keeps the code from the redirect back; the
// app then calls transport.finishAuth(code) and retries, as the SDK's own
// examples do after an UnauthorizedError.
//
// usage: node oauth_client.mjs URL AS_URL LOGIN STEPS [OTHER_URL]
// STEPS as in tests/clients/python/mcp2_oauth_client.py. Prints one JSON object.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { auth, UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';

const [url, asUrl, login, steps, otherUrl] = process.argv.slice(2);
const REDIRECT = 'http://127.0.0.1:1/callback';
const seen = [];
const authorizations = [];

// Every HTTP request the SDK makes (MCP and OAuth alike), as seen on the wire.
async function recordingFetch(input, init) {
  const res = await fetch(input, init);
  const entry = { method: init?.method ?? 'GET', url: String(input).split('?')[0], status: res.status };
  const challenge = res.headers.get('www-authenticate');
  if (challenge) entry.www_authenticate = challenge;
  const body = init?.body;
  if (body instanceof URLSearchParams || (typeof body === 'string' && !body.startsWith('{'))) {
    const form = new URLSearchParams(body);
    entry.form = Object.fromEntries(['grant_type', 'resource', 'scope'].filter((k) => form.has(k)).map((k) => [k, form.get(k)]));
  }
  seen.push(entry);
  return res;
}

// The person at the browser.
async function playUser(authorizationUrl) {
  const q = authorizationUrl.searchParams;
  authorizations.push(Object.fromEntries(['resource', 'scope', 'code_challenge_method'].filter((k) => q.has(k)).map((k) => [k, q.get(k)])));
  const cookies = new Map();
  let next = authorizationUrl.href;
  for (let i = 0; i < 12; i += 1) {
    if (next.startsWith(REDIRECT)) {
      const back = new URL(next).searchParams;
      if (back.has('error')) throw new Error(`authorization refused: ${back}`);
      return back.get('code');
    }
    const headers = { cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join('; ') };
    let res = await fetch(next, { redirect: 'manual', headers });
    const keep = (r) => r.headers.getSetCookie().forEach((c) => {
      const [pair] = c.split(';');
      const eq = pair.indexOf('=');
      cookies.set(pair.slice(0, eq), pair.slice(eq + 1));
    });
    keep(res);
    if (res.status === 200) {
      const html = await res.text();
      const action = new URL(html.split('action="')[1].split('"')[0], next).href;
      headers.cookie = [...cookies].map(([k, v]) => `${k}=${v}`).join('; ');
      res = await fetch(action, {
        method: 'POST', redirect: 'manual', headers: { ...headers, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ login }),
      });
      keep(res);
    }
    if (![302, 303].includes(res.status)) throw new Error(`${res.status} at ${next}: ${await res.text()}`);
    next = new URL(res.headers.get('location'), next).href;
  }
  throw new Error('too many redirects');
}

class Provider {
  constructor(store) {
    this.store = store;
    this.pendingCode = null;
  }
  get redirectUrl() { return REDIRECT; }
  get clientMetadata() {
    return {
      redirect_uris: [REDIRECT], client_name: 'emseepea-ts-oauth-test',
      grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() { return this.store.client; }
  saveClientInformation(info) { this.store.client = info; }
  tokens() { return this.store.tokens; }
  saveTokens(tokens) { this.store.tokens = tokens; this.store.savedAt = Date.now(); }
  saveCodeVerifier(v) { this.store.verifier = v; }
  codeVerifier() { return this.store.verifier; }
  async redirectToAuthorization(authorizationUrl) { this.pendingCode = await playUser(authorizationUrl); }
  invalidateCredentials(scope) {
    if (scope === 'all' || scope === 'client') this.store.client = undefined;
    if (scope === 'all' || scope === 'tokens') this.store.tokens = undefined;
  }
}

class Session {
  constructor(serverUrl, store) {
    this.url = new URL(serverUrl);
    this.provider = new Provider(store);
    this.transport = new StreamableHTTPClientTransport(this.url, { authProvider: this.provider, fetch: recordingFetch });
    this.client = new Client({ name: 'emseepea-ts-oauth', version: '1.0.0' });
  }
  async connect() { await this.client.connect(this.transport); }
  // An SDK call; when the SDK had to send the user to the authorization
  // server, finish with the code and call again.
  async call(fn) {
    try {
      return await fn();
    } catch (e) {
      if (!(e instanceof UnauthorizedError) || !this.provider.pendingCode) throw e;
      const code = this.provider.pendingCode;
      this.provider.pendingCode = null;
      await this.transport.finishAuth(code);
      return fn();
    }
  }
  token() { return this.provider.store.tokens?.access_token; }
  async traverse(between) {
    const uris = [];
    let pages = 0;
    let cursor;
    do {
      const page = await this.call(() => this.client.listResources(cursor ? { cursor } : undefined));
      pages += 1;
      uris.push(...page.resources.map((r) => r.uri));
      cursor = page.nextCursor;
      if (between && pages === 1 && cursor !== undefined) await between();
    } while (cursor !== undefined);
    return { uris, pages };
  }
  async read(uri) { return (await this.call(() => this.client.readResource({ uri }))).contents[0].text; }
}

function kidOf(token) {
  try { return JSON.parse(Buffer.from(token.split('.')[0], 'base64url').toString()).kid ?? null; } catch { return null; }
}

async function rawList(serverUrl, token) {
  const meta = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
    'io.modelcontextprotocol/clientCapabilities': {},
  };
  const res = await fetch(serverUrl, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28', 'mcp-method': 'resources/list',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'resources/list', params: { _meta: meta } }),
  });
  await res.text();
  return { status: res.status, www_authenticate: res.headers.get('www-authenticate') };
}

async function admin(path, body = {}) {
  const res = await fetch(`${asUrl}/admin/${path}`, { method: 'POST', body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`admin ${path}: ${res.status}`);
  return res.json();
}

const store = {};
const s = new Session(url, store);
await s.connect();
const out = { steps: {} };
for (const step of steps.split(',')) {
  const start = seen.length;
  const asked = authorizations.length;
  const r = {};
  if (step === 'signin') {
    Object.assign(r, await s.traverse());
    r.read = await s.read('catalog://catalog/items/0000000001');
  } else if (step === 'whoami') {
    r.principal = JSON.parse(await s.read('hostile://ctx/1')).principal;
  } else if (step === 'stepup') {
    const granted = store.tokens.scope;
    try {
      r.principal = JSON.parse(await s.read('hostile://ctx/1')).principal;
    } catch (e) {
      // What the SDK does by itself is recorded; then what the app must
      // add. The SDK's upscoping refreshes the token (a refresh cannot add a
      // scope) and asks only for the challenged scope; so the app drops its
      // tokens and authorizes again, asking for what it had plus the
      // challenged scope, through the SDK's auth() and finishAuth().
      r.sdk_error = String(e.message ?? e);
      const challenge = seen.slice(start).reverse().find((x) => x.status === 403)?.www_authenticate ?? '';
      const wanted = challenge.match(/scope="([^"]*)"/)?.[1] ?? '';
      s.provider.invalidateCredentials('tokens');
      r.app_auth = await auth(s.provider, { serverUrl: s.url, scope: `${granted} ${wanted}`, fetchFn: recordingFetch });
      await s.transport.finishAuth(s.provider.pendingCode);
      s.provider.pendingCode = null;
      r.principal = JSON.parse(await s.read('hostile://ctx/1')).principal;
    }
  } else if (step === 'expiry') {
    const token = s.token();
    Object.assign(r, await s.traverse(async () => {
      await admin('settings', { ttl: 600 });
      const expiresAt = store.savedAt + store.tokens.expires_in * 1000;
      await new Promise((done) => { setTimeout(done, Math.max(0, expiresAt - Date.now()) + 1500); });
      r.old_token_now = await rawList(url, token);
    }));
    r.token_changed = s.token() !== token;
  } else if (step === 'rotate') {
    const old = s.token();
    r.old_kid = kidOf(old);
    r.rotated = await admin('rotate');
    // The client renews its token through the SDK (a refresh).
    r.renewed = await auth(s.provider, { serverUrl: s.url, fetchFn: recordingFetch });
    r.new_first_page = (await s.call(() => s.client.listResources())).resources[0].uri;
    r.new_kid = kidOf(s.token());
    r.old_before_retire = await rawList(url, old);
    r.retired = await admin('retire');
    let got;
    let polls = 0;
    while (polls < 600) {
      polls += 1;
      got = await rawList(url, old);
      if (got.status !== 200) break;
      await new Promise((done) => { setTimeout(done, 100); });
    }
    r.old_after_retire = got;
    r.polls = polls;
    r.new_after_retire = await rawList(url, s.token());
  } else if (step === 'audience') {
    // Another MCP server trusting the same authorization server; the
    // client's stored token (for the first server) is presented there.
    let other = new Session(otherUrl, store);
    try {
      await other.connect();
      Object.assign(r, await other.traverse());
    } catch (e) {
      // The SDK's answer to the 401 is a refresh for the other resource,
      // which the authorization server refuses (the grant is for the first
      // server only): the app signs in for this server through the SDK.
      r.sdk_error = String(e.message ?? e);
      other.provider.invalidateCredentials('tokens');
      r.app_auth = await auth(other.provider, { serverUrl: other.url, fetchFn: recordingFetch });
      await other.transport.finishAuth(other.provider.pendingCode);
      other = new Session(otherUrl, store);
      await other.connect();
      Object.assign(r, await other.traverse());
    }
    await other.client.close();
  } else {
    throw new Error(`unknown step ${step}`);
  }
  r.seen = seen.slice(start);
  r.authorizations = authorizations.slice(asked);
  out.steps[step] = r;
}
out.authorizations = authorizations;
out.client_id = store.client?.client_id ?? null;
await s.client.close();
console.log(JSON.stringify(out));
