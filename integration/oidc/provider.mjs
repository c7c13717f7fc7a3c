// integration/oidc/provider.mjs: oidc-provider (panva, OpenID Certified), configured as an MCP
// authorization server for mcpsync's integration tests (integration/test_oidc_provider.py).
//
//   OIDC_PEERS_DIR=$(scripts/peers-oidc) node integration/oidc/provider.mjs '{"accessTokenTTL": 60}'
//
// It listens on 127.0.0.1 on a free port, then prints ONE JSON line {"ready": true, "issuer": ...}
// on stdout; after that, one JSON line per event worth a test's look ({"event": "grant.success",
// "grant_type": ...}, {"event": "grant.error", "error": ...}, ...). Never a token or a secret.
// It runs until stdin closes or SIGTERM, so a test that dies cannot leave it behind.
//
// What it is configured for (the way a deployment would set it up for MCP):
//   * dynamic client registration (RFC 7591), open, no initial access token;
//   * PKCE (S256; required of public clients, oidc-provider's default);
//   * resource indicators (RFC 8707): any http://127.0.0.1:PORT/... resource is a resource server
//     with the scopes "mcp:tools mcp:admin"; its access tokens are JWTs (RFC 9068) signed with a
//     key made at start-up, except for a resource whose path starts with /opaque/, whose tokens are
//     opaque (checked by introspection);
//   * refresh tokens for every client allowed the refresh_token grant (issueRefreshToken), since
//     oidc-provider keeps offline_access only with prompt=consent, which MCP clients do not send;
//   * introspection (RFC 7662), revocation (RFC 7009) and the client credentials grant;
//   * an interaction that approves at once: /interaction/UID logs "alice" in, then grants every
//     scope the request asked for, with provider.interactionFinished (a browser stand-in that keeps
//     cookies and follows redirects completes the code flow);
//   * pre-registered clients from the settings (client credentials, private_key_jwt, a resource
//     server that introspects).
//
// Settings (one JSON argument, every key optional):
//   accessTokenTTL    seconds an access token lives (default 60)
//   staticScopes      extra scopes in the provider's own `scopes` list (default none: the MCP
//                     scopes are the resource server's; list them here and a registration may
//                     name them in its `scope`, which then limits the client to them)
//   clients           client metadata (RFC 7591 names) registered at start-up
//   mountPath         serve the provider under this path ("/oidc"), its issuer then
//                     http://127.0.0.1:PORT/oidc; as its docs' mounting example does, only the
//                     provider's own routes are served, so the OpenID discovery document is at
//                     /oidc/.well-known/openid-configuration and RFC 8414's path-inserted
//                     /.well-known/oauth-authorization-server/oidc is a 404 (a client must fall back)
import { randomBytes, generateKeyPairSync } from 'node:crypto';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const peers = process.env.OIDC_PEERS_DIR;
if (!peers) {
  process.stderr.write('provider.mjs: set OIDC_PEERS_DIR to the folder scripts/peers-oidc prints\n');
  process.exit(2);
}
const { default: Provider } = await import(pathToFileURL(join(peers, 'node_modules', 'oidc-provider', 'lib', 'index.js')).href);

const settings = JSON.parse(process.argv[2] || '{}');
const accessTokenTTL = settings.accessTokenTTL ?? 60;
const mountPath = settings.mountPath ?? '';
const MCP_SCOPES = 'mcp:tools mcp:admin';

function emit(value) {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

function resourceServer(indicator) {
  let url;
  try {
    url = new URL(indicator);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' || url.hostname !== '127.0.0.1' || url.hash) return undefined;
  const opaque = url.pathname.startsWith('/opaque/');
  return {
    scope: MCP_SCOPES,
    audience: indicator,
    accessTokenTTL,
    accessTokenFormat: opaque ? 'opaque' : 'jwt',
    ...(opaque ? {} : { jwt: { sign: { alg: 'RS256' } } }),
  };
}

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: 'mcpsync-test', use: 'sig', alg: 'RS256' };

// The port is known only once the socket is bound, and the issuer names it: bind first, then make
// the provider, then answer requests.
let handle = (req, res) => { res.statusCode = 503; res.end(); };
const server = createServer((req, res) => handle(req, res));
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(0, '127.0.0.1', resolve);
});
const issuer = `http://127.0.0.1:${server.address().port}${mountPath}`;

const provider = new Provider(issuer, {
  clients: settings.clients ?? [],
  scopes: ['openid', 'offline_access', ...(settings.staticScopes ?? [])],
  jwks: { keys: [signingKey] },
  cookies: { keys: [randomBytes(32).toString('base64url')] },
  findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
  issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  interactions: { url: async (_ctx, interaction) => `${mountPath}/interaction/${interaction.uid}` },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: async (_ctx, _client, oneOf) => oneOf,
      useGrantedResource: async () => true,
      getResourceServerInfo: async (_ctx, indicator) => {
        const info = resourceServer(indicator);
        if (info === undefined) throw new Provider.errors.InvalidTarget();
        return info;
      },
    },
  },
  ttl: {
    AccessToken: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? accessTokenTTL,
    ClientCredentials: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? accessTokenTTL,
    AuthorizationCode: 60,
    IdToken: 3600,
    RefreshToken: 24 * 3600,
    Interaction: 600,
    Session: 3600,
    Grant: 24 * 3600,
  },
  renderError: async (ctx, out) => {
    ctx.type = 'json';
    ctx.body = out;
  },
});

for (const name of ['grant.success', 'registration_create.success']) {
  provider.on(name, (ctx) => emit({ event: name, grant_type: ctx.oidc?.params?.grant_type, client_id: ctx.oidc?.client?.clientId }));
}
for (const name of ['grant.error', 'registration_create.error', 'introspection.error', 'authorization.error', 'server_error']) {
  provider.on(name, (ctx, err) => emit({ event: name, grant_type: ctx.oidc?.params?.grant_type, error: err.error ?? err.name, description: err.error_description }));
}

// The user, who approves whatever is asked: log in as alice, then consent to every missing scope.
async function interact(req, res) {
  const details = await provider.interactionDetails(req, res);
  const { prompt, params, session, grantId } = details;
  let result;
  if (prompt.name === 'login') {
    result = { login: { accountId: 'alice' } };
  } else if (prompt.name === 'consent') {
    const grant = grantId ? await provider.Grant.find(grantId) : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    const { missingOIDCScope, missingOIDCClaims, missingResourceScopes } = prompt.details;
    if (missingOIDCScope) grant.addOIDCScope(missingOIDCScope.join(' '));
    if (missingOIDCClaims) grant.addOIDCClaims(missingOIDCClaims);
    for (const [indicator, scopes] of Object.entries(missingResourceScopes ?? {})) grant.addResourceScope(indicator, scopes.join(' '));
    const saved = await grant.save();
    result = { consent: grantId ? {} : { grantId: saved } };
  } else {
    result = { error: 'access_denied', error_description: `no automatic answer to the ${prompt.name} prompt` };
  }
  emit({ event: 'interaction', prompt: prompt.name });
  await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: true });
}

const callback = provider.callback();
handle = (req, res) => {
  if (mountPath) {
    if (req.url !== mountPath && !req.url.startsWith(`${mountPath}/`) && !req.url.startsWith(`${mountPath}?`)) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'not_found' }));
      return;
    }
    req.originalUrl = req.url;
    req.url = req.url.slice(mountPath.length) || '/';
  }
  if (req.method === 'GET' && /^\/interaction\/[^/?]+$/.test(req.url)) {
    interact(req, res).catch((err) => {
      emit({ event: 'interaction.error', error: err.name, description: err.message });
      if (!res.headersSent) res.statusCode = 400;
      res.end();
    });
    return;
  }
  callback(req, res);
};

function stop() {
  server.close();
  server.closeAllConnections();
  process.exit(0);
}
process.on('SIGTERM', stop);
process.stdin.on('end', stop);
process.stdin.resume();
emit({ ready: true, issuer });
