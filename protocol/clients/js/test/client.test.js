// The client against a scripted in-process server: pipelining, stream ids,
// the in-flight limit, timeouts, streams and every way a connection can end.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fakeServer } from './helpers.js';
import { Client } from '../src/client.js';
import { encodeFrame } from '../src/frame.js';
import * as errors from '../src/errors.js';

/** @param {number} ms */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** @param {number} port @param {object} [options] */
const connect = (port, options = {}) => Client.connect({ port, apiKey: 'brn_test', ...options });

test('pipelined requests are matched to answers that come back in reverse order', async () => {
  const COUNT = 20;
  /** @type {[any, Function][]} */
  const held = [];
  const server = await fakeServer({
    onRequest(request, reply) {
      held.push([request, reply]);
      if (held.length === COUNT) {
        for (const [r, answer] of held.reverse()) answer({ nonce: r.message.nonce, server_time: 1n });
      }
    },
  });
  const client = await connect(server.port);
  try {
    const answers = await Promise.all(Array.from({ length: COUNT }, (_, i) => client.ping({ nonce: `n${i}` })));
    assert.deepEqual(answers.map((a) => a.nonce), Array.from({ length: COUNT }, (_, i) => `n${i}`));
    assert.equal(client.peakInFlight, COUNT);
    assert.ok(server.streams.every((sid) => sid % 2 === 1), 'odd stream ids');
    assert.equal(new Set(server.streams).size, COUNT, 'distinct stream ids');
  } finally {
    client.close();
    await server.close();
  }
});

test('no more than max_streams requests are ever in flight', async () => {
  const LIMIT = 3;
  let outstanding = 0;
  let worst = 0;
  const server = await fakeServer({
    welcome: { max_streams: LIMIT },
    onRequest(request, reply) {
      outstanding++;
      worst = Math.max(worst, outstanding);
      setTimeout(() => {
        outstanding--;
        reply({ server_time: 1n });
      }, 5);
    },
  });
  const client = await connect(server.port);
  try {
    await Promise.all(Array.from({ length: 12 }, () => client.ping()));
    assert.equal(worst, LIMIT);
  } finally {
    client.close();
    await server.close();
  }
});

test('a timed-out request keeps its stream id reserved until its answer ends', async () => {
  /** @type {Function[]} */
  const late = [];
  const server = await fakeServer({
    onRequest(request, reply) {
      if (request.message.nonce === 'slow') late.push(reply);
      else reply({ nonce: request.message.nonce, server_time: 1n });
    },
  });
  const client = await connect(server.port);
  try {
    await assert.rejects(client.ping({ nonce: 'slow' }, { timeoutMs: 50 }), errors.RequestTimeout);
    assert.equal(client.inFlight, 1);
    assert.deepEqual(await client.ping({ nonce: 'fast' }), { nonce: 'fast', server_time: 1 });
    late[0]({ nonce: 'slow', server_time: 1n }); // dropped quietly, and frees the id
    await sleep(20);
    assert.equal(client.inFlight, 0);
    assert.notEqual(server.streams[0], server.streams[1]);
  } finally {
    client.close();
    await server.close();
  }
});

test('an ERROR answer rejects with its typed error and the connection goes on', async () => {
  const server = await fakeServer({
    onRequest(request, reply) {
      if (request.name === 'MEMORY_GET') {
        reply({ code: 0x40, name: 'INVALID_ARGUMENT', message: 'no', field: 'id', retryable: false }, { opcode: 0xff });
      } else reply({ server_time: 1n });
    },
  });
  const client = await connect(server.port);
  try {
    await assert.rejects(client.memoryGet({ id: Buffer.alloc(16) }), (/** @type {any} */ e) =>
      e instanceof errors.InvalidArgument && e.field === 'id' && e.code === 0x40 && e.retryable === false);
    assert.deepEqual(await client.ping(), { server_time: 1 });
  } finally {
    client.close();
    await server.close();
  }
});

test('a connection ERROR on stream 0 fails every request in flight', async () => {
  const server = await fakeServer({
    onRequest(request, reply, socket) {
      reply({ code: 1, name: 'BAD_FRAME', message: 'broken', retryable: false }, { opcode: 0xff, stream: 0 });
      socket.end();
    },
  });
  const client = await connect(server.port);
  try {
    await assert.rejects(client.ping(), (/** @type {any} */ e) => e instanceof errors.ConnectionClosed && e.cause instanceof errors.BadFrame);
    assert.ok(client.closed);
    await assert.rejects(client.ping(), errors.ConnectionClosed);
  } finally {
    client.close();
    await server.close();
  }
});

test('a corrupt frame from the server is a BadFrame and ends the connection', async () => {
  const server = await fakeServer({
    onRequest(request, reply, socket) {
      const frame = encodeFrame(0x90, request.streamId, Buffer.from('a16b7365727665725f74696d6501', 'hex'), { eos: true });
      frame[frame.length - 1] ^= 1; // payload CRC no longer matches
      socket.write(frame);
    },
  });
  const client = await connect(server.port);
  try {
    await assert.rejects(client.ping(), (/** @type {any} */ e) => e instanceof errors.ConnectionClosed && e.cause instanceof errors.BadFrame);
    assert.ok(client.closed);
  } finally {
    client.close();
    await server.close();
  }
});

test('an answer on a stream nobody asked on is a protocol fault', async () => {
  const server = await fakeServer({ onRequest(request, reply) { reply({ server_time: 1n }, { stream: 99 }); } });
  const client = await connect(server.port);
  try {
    await assert.rejects(client.ping(), (/** @type {any} */ e) => e.cause instanceof errors.BadFrame && /no request in flight/.test(e.cause.message));
  } finally {
    client.close();
    await server.close();
  }
});

test('a payload over max_frame is refused before sending; the connection goes on', async () => {
  const server = await fakeServer({ welcome: { max_frame: 64 }, onRequest(request, reply) { reply({ server_time: 1n }); } });
  const client = await connect(server.port);
  try {
    await assert.rejects(client.encode({ text: 'x'.repeat(100) }), errors.FrameTooLarge);
    await assert.rejects(client.memoryGet({ id: 'not bytes' }), errors.EncodeError);
    assert.equal(server.streams.length, 0, 'nothing was sent');
    assert.deepEqual(await client.ping(), { server_time: 1 });
  } finally {
    client.close();
    await server.close();
  }
});

test('writes get a fresh UUIDv7 request_id unless the caller gives one', async () => {
  /** @type {any[]} */
  const seen = [];
  const server = await fakeServer({
    onRequest(request, reply) {
      seen.push(request.message.request_id);
      reply({ memory_id: Buffer.alloc(16), lsn: 1, recorded_at: 1n, sha256: Buffer.alloc(32), deduplicated: false });
    },
  });
  const client = await connect(server.port);
  try {
    const mine = Buffer.alloc(16, 9);
    await client.encode({ text: 'a' });
    await client.encode({ text: 'b', request_id: mine });
    assert.equal(seen[0].length, 16);
    assert.equal(seen[0][6] >> 4, 7, 'UUID version 7');
    assert.deepEqual(seen[1], mine);
  } finally {
    client.close();
    await server.close();
  }
});

test('a streaming answer yields its frames; leaving early cancels; end holds the stream end', async () => {
  const server = await fakeServer({
    onRequest(request, reply) {
      if (request.name === 'SUBSCRIBE') {
        for (let lsn = 1; lsn <= 3; lsn++) {
          reply({ lsn, op: 'create', record: 'memory', id: Buffer.alloc(16), recorded_at: 1n }, { eos: false });
        }
      } else if (request.name === 'CANCEL_STREAM') {
        reply({ next_lsn: 4 }, { opcode: 0xb0, stream: request.message.stream, eos: true });
        reply({ cancelled: true });
      }
    },
  });
  const client = await connect(server.port);
  try {
    const changes = await client.subscribe({ from_lsn: 1 });
    const lsns = [];
    for await (const change of changes) {
      lsns.push(change.lsn);
      if (change.lsn === 2) break;
    }
    assert.deepEqual(lsns, [1, 2]);
    assert.deepEqual(await changes.end, { next_lsn: 4 });
    await sleep(10);
    assert.equal(client.inFlight, 0);
    await assert.rejects(client.call('SUBSCRIBE', {}), TypeError);
  } finally {
    client.close();
    await server.close();
  }
});

test('HELLO refused for its version: connect rejects with VersionNotSupported', async () => {
  const server = await fakeServer({ refuseVersion: true, onRequest() {} });
  try {
    await assert.rejects(connect(server.port), errors.VersionNotSupported);
  } finally {
    await server.close();
  }
});

test('nothing listening: connect rejects with ConnectionClosed', async () => {
  const server = await fakeServer({ onRequest() {} });
  const { port } = server;
  await server.close();
  await assert.rejects(connect(port), errors.ConnectionClosed);
});
