// A real OAuth 2.1 authorization server for the `[auth]` tests: the
// certified `oidc-provider` library (npm; tests/mcp/servers.txt), with the
// client-credentials grant, resource indicators (RFC 8707: a token is for
// one resource, its `aud`), JWT access tokens (RFC 9068) signed with a key
// made at start, token introspection (RFC 7662) and revocation (RFC 7009);
// and for clients that register themselves (dynamic client registration,
// RFC 7591, open) the authorization-code grant with PKCE, in which the
// user `alice` (groups ["ops"]) signs in and consents at once: the
// interaction is answered by this script, no page to fill in.
//
//   node tests/mcp/oidc_provider.mjs OIDC_PROVIDER_DIR PORT RESOURCE
//
// Prints `ready ISSUER` once it listens. Clients (secret = id + "-secret"):
//   agent         scope "tools ops", groups ["ops"]   JWT tokens
//   guest         scope "tools",     groups ["guests"] JWT tokens
//   noscope       no scope                             JWT tokens
//   short         scope "tools", tokens live 1 s       JWT tokens
//   opaque-agent  scope "tools",     groups ["ops"]   opaque tokens
//   toolgate      the resource server itself, for introspection
import { generateKeyPairSync } from 'node:crypto';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [dir, port, resource] = process.argv.slice(2);
if (!dir || !port || !resource) {
  console.error('usage: oidc_provider.mjs OIDC_PROVIDER_DIR PORT RESOURCE');
  process.exit(2);
}
const { default: Provider } = await import(pathToFileURL(join(dir, 'lib/index.js')).href);

const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const signing = { ...privateKey.export({ format: 'jwk' }), kid: 'test-es256', use: 'sig', alg: 'ES256' };

const GROUPS = { agent: ['ops'], guest: ['guests'], 'opaque-agent': ['ops'], short: [], alice: ['ops'] };
const SCOPES = { agent: 'tools ops', guest: 'tools', short: 'tools', 'opaque-agent': 'tools', noscope: '' };
const client = (id) => ({
  client_id: id,
  client_secret: `${id}-secret`,
  grant_types: ['client_credentials'],
  redirect_uris: [],
  response_types: [],
  ...(SCOPES[id] ? { scope: SCOPES[id] } : {}),
  // Its only key is ES256 (the default, RS256, has no key here).
  id_token_signed_response_alg: 'ES256',
});

const issuer = `http://127.0.0.1:${port}`;
const provider = new Provider(issuer, {
  clients: [
    ...Object.keys(SCOPES).map(client),
    { client_id: 'toolgate', client_secret: 'toolgate-secret', grant_types: [], redirect_uris: [], response_types: [], id_token_signed_response_alg: 'ES256' },
  ],
  jwks: { keys: [signing] },
  scopes: ['tools', 'ops'],
  // Registered clients sign ID tokens with the one key there is.
  clientDefaults: { id_token_signed_response_alg: 'ES256', grant_types: ['authorization_code'], response_types: ['code'] },
  findAccount: async (ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    clientCredentials: { enabled: true },
    introspection: { enabled: true, allowedPolicy: async () => true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: async () => resource,
      useGrantedResource: async () => true,
      getResourceServerInfo: async (ctx, indicator, c) => ({
        // Any resource may be asked for (a token for another one is what
        // the tests present to toolgate); its scopes are the client's.
        scope: 'tools ops',
        audience: indicator,
        accessTokenTTL: c.clientId === 'short' ? 1 : 600,
        accessTokenFormat: c.clientId === 'opaque-agent' ? 'opaque' : 'jwt',
        jwt: { sign: { alg: 'ES256' } },
      }),
    },
  },
  // The user's groups for a user's token; a client's for its own.
  extraTokenClaims: async (ctx, token) => ({ groups: GROUPS[token.accountId ?? token.clientId] ?? [] }),
});
provider.proxy = false;
provider.on('server_error', (ctx, err) => console.error('server_error', err));

// The interaction (`/interaction/UID`): alice signs in, then consents to
// what the client asked for (its scopes on the resource it named).
async function interact(req, res) {
  const details = await provider.interactionDetails(req, res);
  let result;
  if (details.prompt.name === 'login') {
    result = { login: { accountId: 'alice' } };
  } else {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
    const missing = details.prompt.details;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    result = { consent: { grantId: await grant.save() } };
  }
  await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: true });
}

const callback = provider.callback();
const server = createServer((req, res) => {
  if (req.url.startsWith('/interaction/')) {
    interact(req, res).catch((err) => {
      console.error('interaction', err);
      res.statusCode = 500;
      res.end(String(err));
    });
  } else {
    callback(req, res);
  }
});
server.listen(Number(port), '127.0.0.1', () => {
  console.log(`ready ${issuer}`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
