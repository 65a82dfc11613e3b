// stream.test.mjs — messages.stream() against a local server speaking the contract's
// text/event-stream (DESIGN "Live updates"): typed events, comments skipped, CRLF and split
// chunks, reconnection that resumes with Last-Event-ID, `reset`, and errors that do not retry.
// (The same client against missived itself: test/client.test.mjs, "live updates".)
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { after, before, test } from 'node:test';
import { Missive, MissiveError } from 'missive-client';

let server, base;
const connections = [];
const message = (id, title) => ({ id, title });

before(async () => {
  server = createServer((req, res) => {
    const last = req.headers['last-event-id'];
    connections.push({ lastEventId: last, ticket: new URL(req.url, 'http://x').searchParams.get('ticket'), user: req.headers['x-user-id'] });
    if (req.headers['x-user-id'] === 'nobody') {
      res.writeHead(401, { 'Content-Type': 'application/json' });
      return res.end(JSON.stringify({ error: { code: 'unauthenticated', message: 'authentication required' } }));
    }
    res.writeHead(200, { 'Content-Type': 'text/event-stream' });
    if (last === undefined) {
      // first connection: two events (one split across writes, CRLF line ends), then drop
      res.write(': ping\n\n');
      res.write('id: 1\nevent: message.created\ndata: ' + JSON.stringify(message('m1', 'a')) + '\n\n');
      res.write('id: 2\r\nevent: cou');
      setTimeout(() => {
        res.write('nts\r\ndata: {"count": 3,\r\ndata:  "unseen": 1, "unread": 2}\r\n\r\n');
        res.write('event: something.else\ndata: {}\n\n');
        res.end();
      }, 20);
    } else if (last === '2') {
      res.write('retry: 10\n\n');
      res.write('id: 3\nevent: message.updated\ndata: ' + JSON.stringify(message('m1', 'b')) + '\n\n');
      res.end();
    } else {
      res.write('id: 9\nevent: reset\ndata: {}\n\n');
      // stays open: the client closes
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${server.address().port}`;
});

after(() => new Promise((r) => { server.closeAllConnections(); server.close(r); }));

test('events arrive typed, and a dropped connection resumes after the last event id', async () => {
  const client = new Missive({ baseUrl: base, headers: { 'X-User-Id': 'ana' } });
  const stream = client.messages.stream({ retryMs: 10 });
  const got = [];
  for await (const e of stream) {
    got.push(e);
    if (got.length === 4) break;
  }
  stream.close();
  assert.deepEqual(got.map((e) => [e.event, e.id]), [['message.created', '1'], ['counts', '2'], ['message.updated', '3'], ['reset', '9']]);
  assert.deepEqual(got[0].data, message('m1', 'a'));
  assert.deepEqual(got[1].data, { count: 3, unseen: 1, unread: 2 });
  assert.deepEqual(got[2].data, message('m1', 'b'));
  assert.equal(stream.lastEventId, '9');
  assert.deepEqual(connections.slice(0, 3).map((c) => c.lastEventId), [undefined, '2', '3']);
});

test('a resume point and a ticket are sent; an auth error is thrown, not retried', async () => {
  connections.length = 0;
  const client = new Missive({ baseUrl: base, headers: { 'X-User-Id': 'bob' } });
  const stream = client.messages.stream({ lastEventId: '2', ticket: 't-1', reconnect: false });
  const got = [];
  for await (const e of stream) got.push(e.id);
  assert.deepEqual(got, ['3']);
  assert.equal(connections[0].lastEventId, '2');
  assert.equal(connections[0].ticket, 't-1');
  const denied = new Missive({ baseUrl: base, headers: { 'X-User-Id': 'nobody' } }).messages.stream();
  await assert.rejects(async () => { for await (const _ of denied) { /* nothing */ } },
    (e) => e instanceof MissiveError && e.status === 401 && e.code === 'unauthenticated');
  assert.equal(connections.filter((c) => c.user === 'nobody').length, 1);
});
