// Every golden vector of protocol/vectors/golden.json, as tests/unit/wire/test_golden.py
// checks them on the Python side: read whole, one byte at a time, and followed by
// part of a next frame; the payload decodes to the JSON mirror; and both the
// decoded value and the mirror encode back to the exact bytes.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { VECTORS } from './helpers.js';
import { FrameReader, encodeFrame } from '../src/frame.js';
import { ERROR_OPCODE, decodeMessage, encodePayload } from '../src/wire.js';
import { BrainError, UnknownError, errorFromWire, errorToWire, registeredErrors } from '../src/errors.js';
import { fromMirror } from '../src/mirror.js';

/** Bytes of a next frame that follow a vector: a partial header the reader must keep. */
const FOLLOWER_PREFIX = 17;
const follower = encodeFrame(0x0010, 3, Buffer.from('a1656e6f6e636501', 'hex'));

/** @param {any} vector @param {import('../src/frame.js').Frame} frame */
function checkFrame(vector, frame) {
  assert.equal(frame.opcode, Number.parseInt(vector.opcode, 16));
  assert.equal(frame.streamId, vector.stream_id);
  assert.equal(frame.eos, vector.eos);
  assert.equal(frame.payload.toString('hex'), vector.payload_hex);
}

test('there are vectors for every opcode and error', () => {
  assert.ok(VECTORS.length >= 101, `only ${VECTORS.length} vectors`);
  const names = new Set(VECTORS.map((/** @type {any} */ v) => v.name));
  for (const error of registeredErrors().values()) assert.ok(names.has(`ERROR.${error.wireName}`), error.wireName);
});

for (const vector of VECTORS) {
  describe(vector.name, () => {
    const raw = Buffer.from(vector.frame_hex, 'hex');
    const opcode = Number.parseInt(vector.opcode, 16);

    test('whole', () => {
      const reader = new FrameReader();
      const frames = reader.feed(raw);
      assert.equal(frames.length, 1);
      checkFrame(vector, frames[0]);
      assert.equal(reader.buffered, 0);
    });

    test('one byte at a time', () => {
      const reader = new FrameReader();
      const frames = [];
      for (let i = 0; i < raw.length; i++) {
        const got = reader.feed(raw.subarray(i, i + 1));
        if (i < raw.length - 1) assert.deepEqual(got, []);
        frames.push(...got);
      }
      assert.equal(frames.length, 1);
      checkFrame(vector, frames[0]);
    });

    test('followed by part of a next frame', () => {
      const reader = new FrameReader();
      const frames = reader.feed(Buffer.concat([raw, follower.subarray(0, FOLLOWER_PREFIX)]));
      assert.equal(frames.length, 1);
      checkFrame(vector, frames[0]);
      assert.equal(reader.buffered, FOLLOWER_PREFIX);
      assert.equal(reader.feed(follower.subarray(FOLLOWER_PREFIX))[0].streamId, 3);
    });

    test('payload decodes to the mirror, and both encode back to the same bytes', () => {
      const payload = Buffer.from(vector.payload_hex, 'hex');
      const decoded = decodeMessage(opcode, payload, vector.eos);
      const mirrored = fromMirror(vector.payload);
      assert.deepStrictEqual(decoded, mirrored);
      assert.equal(encodePayload(opcode, decoded, vector.eos).toString('hex'), vector.payload_hex);
      const fromJson = encodePayload(opcode, /** @type {any} */ (mirrored), vector.eos);
      assert.equal(fromJson.toString('hex'), vector.payload_hex);
      assert.equal(encodeFrame(opcode, vector.stream_id, fromJson, { eos: vector.eos }).toString('hex'), vector.frame_hex);
    });

    if (opcode === ERROR_OPCODE) {
      test('rebuilds its typed error', () => {
        const payload = decodeMessage(opcode, Buffer.from(vector.payload_hex, 'hex'));
        const error = errorFromWire(/** @type {any} */ (payload));
        assert.ok(error instanceof BrainError);
        assert.ok(!(error instanceof UnknownError));
        assert.equal(error.wireName, vector.name.replace('ERROR.', ''));
        assert.equal(error.code, payload.code);
        assert.equal(error.retryable, payload.retryable);
        assert.equal(error.field, payload.field);
        assert.deepStrictEqual(errorToWire(error), payload);
      });
    }
  });
}

test('spec/01-wire.md §1 examples: PING on stream 1 and HELLO on stream 0', () => {
  const ping = encodeFrame(0x0010, 1, encodePayload(0x0010, { nonce: 7 }));
  assert.equal(ping.toString('hex'), '42524e30010010009489c62500000001000008003e8e706f0000000000000000a1656e6f6e636507');
  const hello = encodeFrame(0x0001, 0, encodePayload(0x0001, { client: 'demo/1', versions: [1] }));
  assert.equal(
    hello.toString('hex'),
    '42524e30010001002270ff130000000000001a00eac1bbd70000000000000000a266636c69656e746664656d6f2f316876657273696f6e738101',
  );
});
