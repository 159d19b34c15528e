// Tokens an attacker can make, for the `[auth]` tests: each carries claims
// a real token had (so only the forgery itself can be why it is refused).
//
//   node tests/mcp/forge_token.mjs KIND TOKEN [JWKS_URL]
//
// KIND:
//   none        the claims with `alg: none` and no signature
//   hs256       signed HS256 with the issuer's *public* key (its JWK's
//               `x`, `y` and the whole JWK as JSON tried by libraries that
//               confuse keys) as the secret: here, the JWK's JSON text
//   unknown-key signed ES256 with a fresh key the issuer never published,
//               under the issuer's own key id
//   tampered    the real signature over claims with `sub` changed
import { createHmac, generateKeyPairSync, sign } from 'node:crypto';

const [kind, token, jwksUrl] = process.argv.slice(2);
const [h, p, s] = token.split('.');
const b64 = (x) => Buffer.from(typeof x === 'string' ? x : JSON.stringify(x)).toString('base64url');
const header = JSON.parse(Buffer.from(h, 'base64url'));
const claims = JSON.parse(Buffer.from(p, 'base64url'));

let out;
switch (kind) {
  case 'none':
    out = `${b64({ alg: 'none', typ: 'at+jwt' })}.${p}.`;
    break;
  case 'hs256': {
    const jwks = await (await fetch(jwksUrl)).json();
    const secret = JSON.stringify(jwks.keys[0]);
    const input = `${b64({ alg: 'HS256', typ: 'at+jwt', kid: header.kid })}.${p}`;
    out = `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`;
    break;
  }
  case 'unknown-key': {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const input = `${b64({ ...header })}.${p}`;
    const sig = sign('sha256', Buffer.from(input), { key: privateKey, dsaEncoding: 'ieee-p1363' });
    out = `${input}.${sig.toString('base64url')}`;
    break;
  }
  case 'tampered':
    out = `${h}.${b64({ ...claims, sub: 'admin' })}.${s}`;
    break;
  default:
    console.error(`unknown kind ${kind}`);
    process.exit(2);
}
console.log(out);
