#!/usr/bin/env node
// Test authorization server for the OAuth integration tests of toolcall-mcp.
//
// Wraps the npm package `oauth2-mock-server` (version pinned in ./VERSION).
// Usage: OAUTH_MODULES=/prefix/node_modules node authorization-server.cjs
//
// stdout: one JSON line at startup ({"issuer","kid"}), then exactly one JSON
// line per stdin command. Everything else goes to stderr. See README.md.
'use strict';

const path = require('node:path');
const http = require('node:http');
const crypto = require('node:crypto');
const readline = require('node:readline');

function log(...args) {
  process.stderr.write(`[oauth-as] ${args.join(' ')}\n`);
}

function out(obj) {
  process.stdout.write(`${JSON.stringify(obj)}\n`);
}

if (!process.env.OAUTH_MODULES) {
  log('OAUTH_MODULES is not set (expected the node_modules directory holding oauth2-mock-server)');
  process.exit(2);
}

// The package is ESM only; Node >= 20.19 can require() it.
const { OAuth2Issuer, OAuth2Service, HttpServer } = require(
  path.join(process.env.OAUTH_MODULES, 'oauth2-mock-server'),
);

const HOST = '127.0.0.1';
const JWKS_PATH = '/jwks'; // the package's default `endpoints.jwks`
const DISCOVERY_PATH = '/.well-known/openid-configuration'; // default `endpoints.wellKnownDocument`
const RFC8414_PATH = '/.well-known/oauth-authorization-server';
const SERVE_RFC8414 = process.env.OAUTH_RFC8414 === '1';

let issuerUrl; // e.g. http://127.0.0.1:41234 (no trailing slash)
let issuer; // OAuth2Issuer: holds the key store and mints tokens
let service; // OAuth2Service: the package's express request handler
let currentKid; // kid new tokens are signed with
let jwksReads = 0;

// Build an issuer + service pair. The package's key store has no removal, so
// "retire" rebuilds the pair from the remaining private JWKs (see README).
async function buildIssuer(privateJwks) {
  const iss = new OAuth2Issuer(false); // false: never add a trailing slash
  iss.url = issuerUrl;
  for (const jwk of privateJwks) await iss.keys.add(jwk);
  return { iss, svc: new OAuth2Service(iss) };
}

function requestPath(req) {
  const q = req.url.indexOf('?');
  return q === -1 ? req.url : req.url.slice(0, q);
}

// Request listener handed to the package's HttpServer. It counts JWKS reads
// and delegates everything to the package's own handler (the express app).
function listener(req, res) {
  const p = requestPath(req);
  // Express (used by the package) matches routes case-insensitively and,
  // with strict routing off, with an optional trailing slash.
  if ((req.method === 'GET' || req.method === 'HEAD') && /^\/jwks\/?$/i.test(p)) {
    jwksReads += 1;
  }
  if (SERVE_RFC8414 && req.method === 'GET' && p === RFC8414_PATH) {
    req.url = DISCOVERY_PATH + req.url.slice(p.length);
  }
  service.requestHandler(req, res);
}

function b64urlJson(obj) {
  return Buffer.from(JSON.stringify(obj)).toString('base64url');
}

function isNum(v) {
  return typeof v === 'number' && Number.isFinite(v);
}

function present(v) {
  return v !== undefined && v !== null;
}

async function mintToken(cmd) {
  for (const f of ['sub', 'client_id', 'scope', 'iss', 'alg', 'typ', 'kid']) {
    if (present(cmd[f]) && typeof cmd[f] !== 'string') throw new Error(`'${f}' must be a string`);
  }
  for (const f of ['expires_in', 'nbf_in']) {
    if (present(cmd[f]) && !isNum(cmd[f])) throw new Error(`'${f}' must be a number`);
  }
  if (present(cmd.aud) && typeof cmd.aud !== 'string'
      && !(Array.isArray(cmd.aud) && cmd.aud.every((a) => typeof a === 'string'))) {
    throw new Error("'aud' must be a string or an array of strings");
  }
  if (present(cmd.claims) && (typeof cmd.claims !== 'object' || Array.isArray(cmd.claims))) {
    throw new Error("'claims' must be an object");
  }
  const alg = present(cmd.alg) ? cmd.alg : 'RS256';
  if (!['RS256', 'none', 'HS256-public-key'].includes(alg)) {
    throw new Error(`unsupported alg '${alg}' (RS256, none, HS256-public-key)`);
  }
  const kid = present(cmd.kid) ? cmd.kid : currentKid;

  // The package sets iss, iat, exp (iat + expiresIn) and nbf (iat - 10); the
  // transform callback adjusts the rest before it signs.
  const transform = (header, payload) => {
    if (present(cmd.typ)) header.typ = cmd.typ;
    if (present(cmd.iss)) payload.iss = cmd.iss;
    if (present(cmd.sub)) payload.sub = cmd.sub;
    if (present(cmd.aud)) payload.aud = cmd.aud;
    if (present(cmd.client_id)) payload.client_id = cmd.client_id;
    if (present(cmd.scope)) payload.scope = cmd.scope;
    if (present(cmd.nbf_in)) payload.nbf = payload.iat + Math.trunc(cmd.nbf_in);
    payload.jti = crypto.randomUUID();
    if (present(cmd.claims)) Object.assign(payload, cmd.claims);
  };
  const opts = { kid, scopesOrTransform: transform };
  // Negative gives exp in the past; the package uses `expiresIn ?? 3600`.
  if (present(cmd.expires_in)) opts.expiresIn = Math.trunc(cmd.expires_in);
  const signed = await issuer.buildToken(opts);
  if (alg === 'RS256') return signed;

  // Same claims, different header/signature.
  const [rawHeader, payloadPart] = signed.split('.');
  const signedHeader = JSON.parse(Buffer.from(rawHeader, 'base64url').toString());
  if (alg === 'none') {
    const header = { alg: 'none', typ: present(cmd.typ) ? cmd.typ : 'JWT' };
    return `${b64urlJson(header)}.${payloadPart}.`;
  }
  // HS256-public-key: HMAC-SHA256 keyed with the RSA public key as SPKI PEM text.
  const jwk = issuer.keys.toJSON().find((k) => k.kid === kid);
  const pem = crypto.createPublicKey({ key: jwk, format: 'jwk' }).export({ type: 'spki', format: 'pem' });
  const header = { alg: 'HS256', typ: signedHeader.typ, kid };
  const input = `${b64urlJson(header)}.${payloadPart}`;
  const sig = crypto.createHmac('sha256', pem).update(input).digest('base64url');
  return `${input}.${sig}`;
}

async function handle(line) {
  let cmd;
  try {
    cmd = JSON.parse(line);
  } catch (e) {
    return { error: `bad JSON: ${e.message}` };
  }
  if (cmd === null || typeof cmd !== 'object' || Array.isArray(cmd)) {
    return { error: 'command must be a JSON object' };
  }
  try {
    switch (cmd.op) {
      case 'token':
        return { token: await mintToken(cmd) };
      case 'rotate': {
        const jwk = await issuer.keys.generate('RS256');
        currentKid = jwk.kid;
        log(`rotated: signing kid is now ${currentKid}`);
        return { kid: currentKid };
      }
      case 'retire': {
        if (typeof cmd.kid !== 'string') return { error: "'kid' must be a string" };
        const keys = issuer.keys.toJSON(true);
        if (!keys.some((k) => k.kid === cmd.kid)) return { error: `unknown kid '${cmd.kid}'` };
        const rest = keys.filter((k) => k.kid !== cmd.kid);
        const { iss, svc } = await buildIssuer(rest);
        issuer = iss;
        service = svc;
        if (currentKid === cmd.kid) {
          currentKid = rest.length > 0 ? rest[rest.length - 1].kid : undefined;
        }
        log(`retired kid ${cmd.kid}; signing kid is ${currentKid}`);
        return { ok: true };
      }
      case 'jwks_reads':
        return { count: jwksReads };
      default:
        return { error: `unknown op ${JSON.stringify(cmd.op)}` };
    }
  } catch (e) {
    return { error: e.message };
  }
}

async function main() {
  const server = new HttpServer(listener);
  await server.start(0, HOST);
  const { port } = server.address();
  // The package's OAuth2Server would name 127.0.0.1 "localhost"; use the
  // address actually bound.
  issuerUrl = `http://${HOST}:${port}`;
  ({ iss: issuer, svc: service } = await buildIssuer([]));
  currentKid = (await issuer.keys.generate('RS256')).kid;

  let stopping = false;
  const stop = async (why) => {
    if (stopping) return;
    stopping = true;
    log(`stopping (${why})`);
    server.stop().catch(() => {});
    // Keep-alive connections would hold close() open; exit now.
    process.exit(0);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));

  out({ issuer: issuerUrl, kid: currentKid });
  log(`listening on ${issuerUrl}`);

  // Commands are answered strictly in order.
  let chain = Promise.resolve();
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  rl.on('line', (line) => {
    if (line.trim() === '') return;
    chain = chain.then(() => handle(line)).then(out);
  });
  rl.on('close', () => {
    chain.then(() => stop('stdin closed'));
  });
}

main().catch((e) => {
  log(`fatal: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
