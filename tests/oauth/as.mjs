// A real authorization server for the end-to-end OAuth tests (tests/oauth_flow.rs):
// panva's oidc-provider (OpenID Certified), on 127.0.0.1 port 0, with
// authorization code + PKCE, refresh tokens, resource indicators (RFC 8707),
// dynamic client registration, introspection and a rotatable JWKS.
//
// Test-only parts, reachable on loopback only and never part of a real deployment:
// - the interaction (login + consent) pages: GET /interaction/UID shows a login
//   form, POST /interaction/UID with `login=NAME` signs NAME in; the consent that
//   follows is given automatically (the "user" approves the requested scopes,
//   except those in `settings.withhold` on a user's first consent to a client);
// - /admin/*: POST /admin/settings (JSON merged into `settings`), POST
//   /admin/rotate (a new signing key; the old ones stay published),
//   POST /admin/retire (only the newest key stays published), GET /admin/stats.
//
// usage: node as.mjs   (prints `as listening on http://127.0.0.1:PORT` when ready)
import http from 'node:http';
import crypto from 'node:crypto';
import Provider from 'oidc-provider';
import { createMemoryAdapter } from 'oidc-provider/lib/adapters/memory_adapter.js';

// What the server issues; the test changes it through /admin/settings.
const settings = {
  // 'jwt' (RFC 9068 access tokens) or 'opaque' (for introspection).
  format: 'jwt',
  // Access-token lifetime in seconds.
  ttl: 600,
  // Scopes every loopback resource server accepts.
  scopes: 'catalog:read notes:read',
  // Scopes the user declines on their first consent to a client (step-up).
  withhold: [],
  // `aud` of access tokens: the resource indicator itself unless set
  // (e.g. an `api://` URI, as Entra ID and Okta issue).
  audience: null,
  // Extra claims in every access token (e.g. `oid`, `roles`).
  extraClaims: {},
};

// The introspecting resource server (emseepea in mode "introspection").
const INTROSPECTOR = { client_id: 'emseepea', client_secret: 'introspection-secret-for-tests' };
const COOKIE_KEYS = [crypto.randomBytes(32).toString('hex')];

let keyCount = 0;
function newKey() {
  keyCount += 1;
  const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...privateKey.export({ format: 'jwk' }), kid: `key-${keyCount}`, alg: 'RS256', use: 'sig' };
}

// Newest first: oidc-provider signs with the first key of an algorithm.
let keys = [newKey()];
// One in-memory store for every provider instance (a rotation makes a new
// one): registered clients, grants and refresh tokens outlive the keys.
const adapter = createMemoryAdapter(0);
const consented = new Set();
const stats = { introspections: 0, tokens: 0, registrations: 0, jwks: 0 };

function isLoopbackResource(indicator) {
  try {
    const u = new URL(indicator);
    return u.protocol === 'http:' && u.hostname === '127.0.0.1';
  } catch {
    return false;
  }
}

function makeProvider(issuer) {
  const provider = new Provider(issuer, {
    clients: [{
      ...INTROSPECTOR,
      grant_types: [],
      response_types: [],
      redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
    }],
    adapter,
    // Clients register with the scopes they will ask for (RFC 7591
    // `scope`), which must be scopes the server knows.
    scopes: ['openid', 'offline_access', 'catalog:read', 'notes:read'],
    jwks: { keys },
    cookies: { keys: COOKIE_KEYS },
    findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    pkce: { required: () => true },
    // Refresh tokens for every client that registered the grant (not only
    // for `offline_access`, which MCP clients do not ask for).
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    ttl: {
      AccessToken: () => settings.ttl,
      RefreshToken: 3600,
    },
    extraTokenClaims: async () => (Object.keys(settings.extraClaims).length ? settings.extraClaims : undefined),
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true },
      introspection: {
        enabled: true,
        // Only the resource server may introspect.
        allowedPolicy: async (_ctx, client) => client.clientId === INTROSPECTOR.client_id,
      },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // A request without `resource` gets no access token for any MCP server.
        defaultResource: async (_ctx, _client, oneOf) => oneOf,
        useGrantedResource: async () => true,
        getResourceServerInfo: async (_ctx, indicator) => {
          if (!isLoopbackResource(indicator)) throw new Provider.errors.InvalidTarget();
          return {
            scope: settings.scopes,
            audience: settings.audience ?? indicator,
            accessTokenTTL: settings.ttl,
            accessTokenFormat: settings.format,
            jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
  });
  provider.on('grant.success', () => { stats.tokens += 1; });
  provider.on('registration_create.success', () => { stats.registrations += 1; });
  provider.on('introspection.error', (_ctx, err) => console.error('introspection error', err));
  provider.on('server_error', (_ctx, err) => console.error('server error', err));
  return provider;
}

async function body(req) {
  const chunks = [];
  let size = 0;
  for await (const c of req) {
    size += c.length;
    if (size > 65536) throw new Error('body too large');
    chunks.push(c);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function send(res, status, type, text) {
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
  res.end(text);
}

async function interaction(provider, req, res) {
  const details = await provider.interactionDetails(req, res);
  const { prompt, params, uid } = details;
  if (prompt.name === 'login') {
    if (req.method === 'GET') {
      return send(res, 200, 'text/html', `<!doctype html><title>Sign in</title>
<form method="post" action="/interaction/${uid}"><input name="login"><button>Sign in</button></form>`);
    }
    const login = new URLSearchParams(await body(req)).get('login');
    if (!login) return send(res, 400, 'text/plain', 'login required');
    return provider.interactionFinished(req, res, { login: { accountId: login } }, { mergeWithLastSubmission: false });
  }
  // Consent, given at once: the requested scopes, less those the user
  // declines on a first consent (settings.withhold).
  const accountId = details.session.accountId;
  const key = `${accountId} ${params.client_id}`;
  const first = !consented.has(key);
  consented.add(key);
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId, clientId: params.client_id });
  const d = prompt.details;
  const declines = (s) => first && settings.withhold.includes(s);
  if (d.missingOIDCScope) {
    grant.addOIDCScope(d.missingOIDCScope.filter((s) => !declines(s)).join(' '));
    const declined = d.missingOIDCScope.filter(declines);
    if (declined.length) grant.rejectOIDCScope(declined.join(' '));
  }
  if (d.missingOIDCClaims) grant.addOIDCClaims(d.missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(d.missingResourceScopes ?? {})) {
    const declined = scopes.filter(declines);
    grant.addResourceScope(indicator, scopes.filter((s) => !declined.includes(s)).join(' '));
    if (declined.length) grant.rejectResourceScope(indicator, declined.join(' '));
  }
  const grantId = await grant.save();
  return provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

async function admin(req, res, path, rebuild) {
  if (req.method === 'GET' && path === '/admin/stats') {
    return send(res, 200, 'application/json', JSON.stringify({ ...stats, keys: keys.map((k) => k.kid) }));
  }
  if (req.method !== 'POST') return send(res, 405, 'text/plain', 'POST');
  if (path === '/admin/settings') {
    Object.assign(settings, JSON.parse((await body(req)) || '{}'));
  } else if (path === '/admin/rotate') {
    keys = [newKey(), ...keys];
    rebuild();
  } else if (path === '/admin/retire') {
    keys = keys.slice(0, 1);
    rebuild();
  } else {
    return send(res, 404, 'text/plain', 'no such admin endpoint');
  }
  return send(res, 200, 'application/json', JSON.stringify({ settings, keys: keys.map((k) => k.kid) }));
}

let provider;
let callback;
const server = http.createServer(async (req, res) => {
  const path = new URL(req.url, 'http://x').pathname;
  try {
    if (path.startsWith('/admin/')) {
      return await admin(req, res, path, () => {
        // A new provider over the same in-memory store:
        // registered clients, grants and refresh tokens carry over; only
        // the keys change, as at an authorization server rotating its keys.
        provider = makeProvider(issuer);
        callback = provider.callback();
      });
    }
    if (path.startsWith('/interaction/')) return await interaction(provider, req, res);
    if (path === '/jwks') stats.jwks += 1;
    if (path === '/token/introspection') stats.introspections += 1;
    return callback(req, res);
  } catch (e) {
    console.error(e);
    if (!res.headersSent) send(res, 500, 'text/plain', 'error');
  }
});

let issuer;
server.listen(0, '127.0.0.1', () => {
  issuer = `http://127.0.0.1:${server.address().port}`;
  provider = makeProvider(issuer);
  callback = provider.callback();
  console.log(`as listening on ${issuer}`);
});
