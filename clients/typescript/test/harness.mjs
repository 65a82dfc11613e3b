// harness.mjs — a live missived for the client tests: a free loopback port, a temporary
// directory with config, templates and saga definitions, a local HTTP receiver for the
// webhooks the daemon sends (handler, prepare, saga steps), and a fetch that records every
// response under MISSIVE_TEST_RECORD_DIR for the OpenAPI validation (test/openapi.test.mjs).
import { spawn } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
export const missived = resolve(repoRoot, process.env.BUILD ?? 'build', 'missived');

export function freePort() {
  return new Promise((res, rej) => {
    const s = createNetServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
    s.on('error', rej);
  });
}

/** A fetch that appends {method, path, status, contentType, body} of each answer to
 * $MISSIVE_TEST_RECORD_DIR/ts-<pid>.jsonl (event streams are recorded without their body). */
export function recordingFetch() {
  const dir = process.env.MISSIVE_TEST_RECORD_DIR;
  return async (input, init = {}) => {
    const res = await fetch(input, init);
    if (!dir) return res;
    const url = new URL(typeof input === 'string' ? input : input.url);
    const contentType = res.headers.get('content-type') ?? '';
    const body = contentType.startsWith('text/event-stream') ? '' : await res.clone().text();
    mkdirSync(dir, { recursive: true });
    appendFileSync(join(dir, `ts-${process.pid}.jsonl`), JSON.stringify({
      method: init.method ?? 'GET', path: url.pathname + url.search, status: res.status, contentType, body, source: 'ts',
    }) + '\n');
    return res;
  };
}

/** A local webhook receiver: records each request (headers, raw body) and answers through
 * handlers[path] (default 200 {"ok": true}). */
export async function startReceiver() {
  const requests = [];
  const handlers = {};
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      const raw = Buffer.concat(chunks);
      const entry = { method: req.method, path: req.url, headers: req.headers, raw: raw.toString('utf8') };
      requests.push(entry);
      const h = handlers[req.url.split('?')[0]];
      const answer = h ? await h(entry) : { status: 200, body: { ok: true } };
      res.writeHead(answer.status ?? 200, { 'Content-Type': 'application/json' });
      res.end(answer.body === undefined ? '' : JSON.stringify(answer.body));
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${server.address().port}`;
  return { url, requests, handlers, close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(r); }) };
}

/** Writes files under a fresh temporary directory: {relative path: text or object}. */
export function writeTree(files) {
  const dir = mkdtempSync(join(tmpdir(), 'missive-ts-'));
  for (const [rel, content] of Object.entries(files)) {
    const p = join(dir, rel);
    mkdirSync(dirname(p), { recursive: true });
    writeFileSync(p, typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  }
  return dir;
}

/** Starts missived with dir/missive.json on a free port; resolves once /healthz answers. */
export async function startDaemon(dir, env = {}) {
  const port = await freePort();
  const child = spawn(missived, ['--config', join(dir, 'missive.json'), '--listen', `127.0.0.1:${port}`], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  child.stderr.on('data', (d) => { log += d; });
  const baseUrl = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 250; i++) {
    if (child.exitCode !== null) throw new Error(`missived exited: ${log}`);
    try {
      const r = await fetch(`${baseUrl}/healthz`);
      if (r.ok) break;
    } catch { /* not yet listening */ }
    await new Promise((r) => setTimeout(r, 20));
  }
  return {
    baseUrl,
    log: () => log,
    stop: () => new Promise((r) => {
      if (child.exitCode !== null) return r(child.exitCode);
      child.on('exit', (code) => r(code));
      child.kill('SIGTERM');
    }),
  };
}
