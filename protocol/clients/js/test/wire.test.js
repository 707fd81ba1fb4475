// Schema-directed encoding: what protocol/schema.json says a key is decides
// its bytes, whatever JavaScript value the caller used.

import { test } from 'node:test';
import { readFileSync } from 'node:fs';
import assert from 'node:assert/strict';
import { code } from './helpers.js';
import { Float, decode, encode as encodePlain } from '../src/cbor.js';
import { EncodeError } from '../src/errors.js';
import {
  OPCODES, SCHEMA, STREAMING_OPCODES, dateFromNanos, decodeMessage, encodePayload, float32Values, nanosFromDate, parseType,
} from '../src/wire.js';
import { Client } from '../src/client.js';

const ID = Buffer.alloc(16, 7);
/** @param {string} name @param {Record<string, unknown>} message */
const bytes = (name, message) => encodePayload(code(name), message);

test('every type text in schema.json parses, and every shape it names exists', () => {
  for (const fields of Object.values(SCHEMA.shapes)) {
    for (const field of /** @type {any[]} */ (fields)) assert.ok(parseType(field.type), field.type);
  }
});

test('every request opcode has a camelCase method, listed in the OpcodeMethods typedef', () => {
  const source = readFileSync(new URL('../src/client.js', import.meta.url), 'utf8');
  const listed = new Set([...source.matchAll(/@property \{(?:Request|Stream)Method\} (\w+)/g)].map((m) => m[1]));
  const generated = new Set();
  for (const op of OPCODES) {
    if (['HELLO', 'AUTH'].includes(op.name)) continue;
    const name = op.name.toLowerCase().replace(/_([a-z])/g, (/** @type {string} */ _, /** @type {string} */ c) => c.toUpperCase());
    assert.equal(typeof (/** @type {any} */ (Client.prototype))[name], 'function', name);
    if (op.name !== 'BYE') generated.add(name);
  }
  assert.deepEqual([...listed].sort(), [...generated].sort());
});

test('an integral number in a float key travels as a float; in an int key as an int', () => {
  const payload = bytes('STATEMENT_CREATE', {
    request_id: ID, kind: 'fact', subject: { name: 'A' }, predicate: 'p', object: { float: 2 }, confidence: 1,
  });
  const hex = payload.toString('hex');
  assert.ok(hex.includes('6a636f6e666964656e6365f93c00'), 'confidence: f93c00'); // "confidence": 1.0
  assert.ok(hex.includes('65666c6f6174f94000'), 'object.float: f94000'); // "float": 2.0
  const asInt = bytes('STATEMENT_CREATE', {
    request_id: ID, kind: 'fact', subject: { name: 'A' }, predicate: 'p', object: { int: 2 },
  });
  assert.ok(asInt.toString('hex').includes('63696e7402'), 'object.int: 02');
  const arms = bytes('RECALL', { cue: 'x', arms: { semantic: 0, lexical: 1, graph: 0.5 } });
  assert.deepEqual(decode(arms), { cue: 'x', arms: { semantic: new Float(0), lexical: new Float(1), graph: 0.5 } });
});

test('decoding unwraps integral floats in float keys, not in untyped ones', () => {
  const response = code('STATEMENT_GET') | 0x80;
  const statement = {
    id: ID, space: 'default', kind: 'fact', subject: { entity: ID }, predicate: 'p', object: { float: 3 },
    confidence: 1, evidence: [], recorded_at: 5n, version: 1, chain_root: ID,
  };
  const wire = encodePayload(response, { statement });
  assert.ok(wire.toString('hex').includes('6a636f6e666964656e6365f93c00'));
  const history = decodeMessage(response, wire);
  assert.equal(history.statement.confidence, 1);
  assert.equal(history.statement.object.float, 3);
  const pong = decodeMessage(code('PING') | 0x80, encodePayload(code('PING') | 0x80, { nonce: new Float(1), server_time: 1n }));
  assert.ok(pong.nonce instanceof Float, 'an untyped integral float stays a Float');
});

test('BigInt and numbers up to 2^53 in int keys; anything else is refused before sending', () => {
  const big = bytes('ENCODE', { request_id: ID, text: 't', occurred_at: 1_700_000_000_000_000_123n });
  assert.equal(/** @type {any} */ (decode(big)).occurred_at, 1_700_000_000_000_000_123n);
  assert.throws(() => bytes('ENCODE', { request_id: ID, text: 't', occurred_at: 1.5 }), EncodeError);
  assert.throws(() => bytes('ENCODE', { request_id: ID, text: 't', occurred_at: 1_700_000_000_000_000_000 }), /BigInt/);
  assert.throws(() => bytes('ENCODE', { request_id: ID, text: 't', occurred_at: '1' }), EncodeError);
});

test('bytes must be bytes: a hex string is refused, naming the key path', () => {
  assert.throws(
    () => bytes('STATEMENT_CREATE', {
      request_id: ID, kind: 'fact', subject: { name: 'A' }, predicate: 'p', object: { text: 'x' },
      evidence: [{ memory: ID.toString('hex') }],
    }),
    (/** @type {any} */ error) => error instanceof EncodeError && error.field === 'evidence[0].memory',
  );
  assert.throws(() => bytes('MEMORY_GET', { id: 'abc' }), EncodeError);
  assert.throws(() => bytes('ENCODE', { request_id: ID, text: 't', override_forgotten: 1 }), /boolean/);
});

test('null and undefined mean absent for a message key; null inside an untyped value is kept', () => {
  assert.deepEqual(decode(bytes('MEMORY_GET', { id: ID, space: null, txn_id: undefined })), { id: ID });
  assert.deepEqual(decode(bytes('PING', { nonce: null })), {});
  assert.deepEqual(decode(bytes('PING', { nonce: [null, { a: null }] })), { nonce: [null, { a: null }] });
});

test('unknown keys and ambiguous unions go out as they are, for the server to name', () => {
  assert.deepEqual(decode(bytes('MEMORY_GET', { id: ID, filters: { as_of: 1 } })), { id: ID, filters: { as_of: 1 } });
  const both = bytes('STATEMENT_CREATE', {
    request_id: ID, kind: 'fact', subject: { name: 'A', entity: ID }, predicate: 'p', object: { text: 'x' },
  });
  assert.deepEqual(/** @type {any} */ (decode(both)).subject, { name: 'A', entity: ID });
});

test('an empty payload is the empty map; a payload that is not a map is refused', () => {
  assert.deepEqual(decodeMessage(code('BYE'), Buffer.alloc(0)), {});
  assert.throws(() => decodeMessage(code('BYE'), Buffer.from('80', 'hex')), /map with text keys/);
  assert.throws(() => decodeMessage(code('BYE'), Buffer.from('a10101', 'hex')), /map with text keys/);
});

test('a Float32Array vector travels as little-endian float32 bytes and reads back the same', () => {
  const values = new Float32Array([0.25, -0.5, 0.125, 1, Math.fround(0.1), -0]);
  const payload = bytes('RECALL', { cue: 'c', vector: values });
  const sent = /** @type {any} */ (decode(payload)).vector;
  assert.ok(Buffer.isBuffer(sent));
  // The golden RECALL vector holds [0.25, -0.5, 0.125, 1.0] in this byte order.
  assert.equal(sent.subarray(0, 16).toString('hex'), '0000803e000000bf0000003e0000803f');
  const back = float32Values(decodeMessage(code('RECALL'), payload).vector);
  assert.deepEqual([...back], [...values]);
  assert.ok(Object.is(back[5], -0));
});

test('a plain array of numbers for a vector is refused, not guessed at', () => {
  assert.throws(() => bytes('RECALL', { cue: 'c', vector: [0.25, -0.5] }), (error) => {
    assert.ok(error instanceof EncodeError);
    assert.equal(/** @type {EncodeError} */ (error).field, 'vector');
    assert.match(String(/** @type {Error} */ (error).message), /Float32Array/);
    return true;
  });
});

test('null for a key of a received message means absent, at every depth; inside any it is kept', () => {
  const response = code('STATEMENT_GET') | 0x80;
  const golden = JSON.parse(readFileSync(new URL('../../../vectors/golden.json', import.meta.url), 'utf8'))
    .vectors.find((/** @type {any} */ v) => v.name === 'STATEMENT_GET.response');
  const statement = decode(Buffer.from(golden.payload_hex, 'hex'));
  const withNulls = { .../** @type {any} */ (statement), ghost: null };
  withNulls.statement = { ...withNulls.statement, valid_to: null };
  const message = decodeMessage(response, encodePlain(withNulls));
  assert.equal('ghost' in message, false);
  assert.equal('valid_to' in message.statement, false);
  const ping = decodeMessage(code('PING') | 0x80, encodePlain({ nonce: [null, { a: null }], server_time: 1 }));
  assert.deepEqual(ping.nonce, [null, { a: null }]);
});

test('the streaming opcodes are those schema.json gives a stream_end shape', () => {
  const fromSchema = SCHEMA.opcodes.filter((/** @type {any} */ op) => op.stream_end).map((/** @type {any} */ op) => op.name);
  assert.ok(fromSchema.length > 0);
  assert.deepEqual([...STREAMING_OPCODES].sort(), fromSchema.sort());
  for (const op of OPCODES) assert.equal(STREAMING_OPCODES.has(op.name), op.streamEnd !== null, op.name);
});

test('a Date in a time key travels as exactly its milliseconds × 1,000,000 (BigInt)', () => {
  const when = new Date('1969-07-20T20:17:40.123Z'); // before 1970: negative
  const ns = BigInt(when.getTime()) * 1_000_000n;
  assert.deepEqual(decode(bytes('STATEMENT_LIST', { as_of: when, valid_at: when })), { as_of: ns, valid_at: ns });
  assert.deepEqual(bytes('STATEMENT_LIST', { as_of: when }), bytes('STATEMENT_LIST', { as_of: ns }));
  // Nested, and in a union member: an object that is a time.
  const created = /** @type {any} */ (decode(bytes('STATEMENT_CREATE', {
    request_id: ID, kind: 'event', subject: { name: 'A' }, predicate: 'p', object: { time: new Date(0) }, event_at: when,
  })));
  assert.deepEqual(created.object, { time: 0 }); // 0n, decoded: a safe integer reads as a number
  assert.equal(created.event_at, ns);
  assert.equal(nanosFromDate(when), ns);
  assert.equal(dateFromNanos(ns).getTime(), when.getTime());
  assert.equal(dateFromNanos(ns + 999_999n).getTime(), when.getTime(), 'rounds down');
});

test('an invalid Date, or a Date where the integer is no time, is an EncodeError (a TypeError)', () => {
  const refused = (/** @type {string} */ field) => (/** @type {any} */ e) => e instanceof EncodeError && e instanceof TypeError && e.field === field;
  assert.throws(() => bytes('STATEMENT_LIST', { as_of: new Date(Number.NaN) }), refused('as_of'));
  assert.throws(() => bytes('STATEMENT_LIST', { limit: new Date() }), refused('limit'));
  assert.throws(() => bytes('STATEMENT_CREATE', {
    request_id: ID, kind: 'fact', subject: { name: 'A' }, predicate: 'p', object: { int: new Date() },
  }), refused('object.int'));
  assert.throws(() => bytes('STATEMENT_LIST', { as_of: '2024-01-01' }), refused('as_of'));
});

test('the keys schema.json marks as times are signed 64-bit integers, and include the familiar ones', () => {
  const times = new Set();
  for (const [shape, fields] of Object.entries(SCHEMA.shapes)) {
    for (const field of /** @type {any[]} */ (fields)) {
      if (!/ time$/.test(field.type)) continue;
      assert.match(field.type, /^int\[-9223372036854775808\.\.9223372036854775807\] time$/, `${shape}.${field.key}`);
      times.add(field.key);
    }
  }
  for (const key of ['as_of', 'valid_at', 'valid_from', 'valid_to', 'recorded_at', 'occurred_at', 'server_time', 'time']) assert.ok(times.has(key), key);
  assert.ok(!times.has('int') && !times.has('limit') && !times.has('lsn'));
});

test('every read takes min_lsn, an unsigned 64-bit integer, and no write does', () => {
  const reads = OPCODES.filter((op) => op.permission === 'read' && !['SUBSCRIBE', 'UNSUBSCRIBE'].includes(op.name));
  assert.ok(reads.length >= 15);
  for (const op of OPCODES) {
    const row = /** @type {any[]} */ (SCHEMA.opcodes).find((r) => r.name === op.name);
    const fields = /** @type {any[]} */ (SCHEMA.shapes[row.request] ?? []);
    const field = fields.find((f) => f.key === 'min_lsn');
    if (reads.includes(op)) assert.match(field?.type ?? '', /^int\[0\.\.18446744073709551615\]/, op.name);
    else assert.equal(field, undefined, op.name);
  }
  const sent = decode(bytes('MEMORY_GET', { id: ID, min_lsn: 2n ** 63n }));
  assert.equal(sent.min_lsn, 2n ** 63n);
  const refused = (/** @type {any} */ e) => e instanceof EncodeError && e.field === 'min_lsn';
  // The client checks the type; the range is the server's to refuse (INVALID_ARGUMENT).
  assert.throws(() => bytes('RECALL', { cue: 'x', min_lsn: '3' }), refused);
});
