// integration/oidc/sdk_oauth_driver.mjs: the official TypeScript SDK's client logs in through
// oidc-provider (its auth() behind StreamableHTTPClientTransport, with an OAuthClientProvider)
// and calls a tool on mcpsync's protected endpoint.
//
//   node integration/oidc/sdk_oauth_driver.mjs SDK_DIR URL
//
// SDK_DIR is @modelcontextprotocol/sdk's package folder (in .peers-npm, scripts/peers-npm). The SDK
// does the discovery (protected resource metadata, then the authorization server's), dynamic
// registration, PKCE and the token request itself; this script only plays the user: the
// "browser" is fetch with a cookie jar, following the provider's redirects (its interaction
// approves at once) until the one back to the client's redirect URL, whose code goes to
// transport.finishAuth(), as an application's callback page would hand it over.
//
// Output: ONE JSON line on stdout (whoami, the authorization request's scope and resource, the
// registered client's id) and exit 0; on failure the error on stderr and exit 1.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [sdkDir, serverUrl] = process.argv.slice(2);
if (!sdkDir || !serverUrl) {
  process.stderr.write('usage: node sdk_oauth_driver.mjs SDK_DIR URL\n');
  process.exit(2);
}
const load = (file) => import(pathToFileURL(join(sdkDir, 'dist', 'esm', 'client', file)).href);
const { Client } = await load('index.js');
const { StreamableHTTPClientTransport } = await load('streamableHttp.js');
const { UnauthorizedError } = await load('auth.js');

const REDIRECT = 'http://127.0.0.1:9/callback'; // the application's page: never connected to
const HOPS = 10;

// The user agent: cookies by name (the provider's are unique by name), redirects followed by hand.
async function approve(start) {
  const jar = new Map();
  let url = new URL(start);
  for (let hop = 0; hop < HOPS; hop += 1) {
    const cookie = [...jar].map(([name, value]) => `${name}=${value}`).join('; ');
    const answer = await fetch(url, { redirect: 'manual', headers: cookie ? { cookie } : {}, signal: AbortSignal.timeout(10_000) });
    for (const line of answer.headers.getSetCookie()) {
      const [pair, ...attributes] = line.split(';');
      const at = pair.indexOf('=');
      const name = pair.slice(0, at).trim();
      const value = pair.slice(at + 1).trim();
      const expired = attributes.some((a) => /^\s*expires=/i.test(a) && Date.parse(a.split('=')[1]) < Date.now());
      if (!value || expired) jar.delete(name); else jar.set(name, value);
    }
    const location = answer.headers.get('location');
    if (answer.status < 300 || answer.status >= 400 || !location) {
      throw new Error(`the authorization server answered ${answer.status} at ${url.pathname}: ${(await answer.text()).slice(0, 300)}`);
    }
    await answer.arrayBuffer();
    url = new URL(location, url);
    if (url.href.startsWith(REDIRECT)) {
      const code = url.searchParams.get('code');
      if (!code) throw new Error(`the login came back without a code: ${url.searchParams.get('error')}`);
      return code;
    }
  }
  throw new Error(`no way back to the client after ${HOPS} redirects`);
}

class Provider {
  constructor() {
    this.authorizationUrl = undefined;
    this.code = undefined;
  }
  get redirectUrl() { return REDIRECT; }
  get clientMetadata() {
    return {
      client_name: 'TypeScript SDK under mcpsync test',
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      application_type: 'native',
    };
  }
  clientInformation() { return this.client; }
  saveClientInformation(client) { this.client = client; }
  tokens() { return this.saved; }
  saveTokens(tokens) { this.saved = tokens; }
  saveCodeVerifier(verifier) { this.verifier = verifier; }
  codeVerifier() { return this.verifier; }
  async redirectToAuthorization(url) {
    this.authorizationUrl = url;
    this.code = await approve(url);
  }
}

async function main() {
  const provider = new Provider();
  const client = new Client({ name: 'sdk-oauth-driver', version: '1.0.0' });
  try {
    await client.connect(new StreamableHTTPClientTransport(new URL(serverUrl), { authProvider: provider }));
    throw new Error('the endpoint let the SDK in without a login');
  } catch (error) {
    if (!(error instanceof UnauthorizedError) || provider.code === undefined) throw error;
  }
  const transport = new StreamableHTTPClientTransport(new URL(serverUrl), { authProvider: provider });
  await transport.finishAuth(provider.code);
  await client.connect(transport);
  const whoami = await client.callTool({ name: 'whoami', arguments: {} });
  await client.close();
  process.stdout.write(`${JSON.stringify({
    whoami: whoami.structuredContent,
    scope: provider.authorizationUrl.searchParams.get('scope'),
    resource: provider.authorizationUrl.searchParams.get('resource'),
    codeChallengeMethod: provider.authorizationUrl.searchParams.get('code_challenge_method'),
    clientId: provider.client?.client_id,
    refreshToken: typeof provider.saved?.refresh_token === 'string',
  })}\n`);
}

main().then(() => process.exit(0), (error) => {
  process.stderr.write(`${error?.stack ?? error}\n`);
  process.exit(1);
});
