#!/usr/bin/env node
// The JavaScript client's adapter for the conformance runner:
//
//   python3 protocol/conformance/run.py -- node protocol/clients/js/conformance-adapter.js
//
// One JSON request per line on stdin, one JSON answer per line on stdout, in
// order; the line protocol is in protocol/conformance/README.md. Everything
// goes through the client's own code paths: FrameReader, decodeMessage,
// errorFromWire, encodePayload, encodeFrame.

import { createInterface } from 'node:readline';
import { FrameReader, encodeFrame, DEFAULT_MAX_FRAME } from './src/frame.js';
import { BadFrame, FrameTooLarge, EncodeError, errorFromWire } from './src/errors.js';
import { ERROR_OPCODE, PayloadError, decodeMessage, encodePayload } from './src/wire.js';
import { fromMirror, toMirror } from './src/mirror.js';

const IMPLEMENTATION = 'brain-js/0.1.0';

/** @param {import('./src/frame.js').Frame} frame */
function describeFrame(frame) {
  const message = decodeMessage(frame.opcode, frame.payload, frame.eos);
  /** @type {Record<string, unknown>} */
  const out = { opcode: frame.opcode, stream_id: frame.streamId, eos: frame.eos, payload: toMirror(message) };
  if (frame.opcode === ERROR_OPCODE) {
    // What the typed error reports, not what the payload said.
    const error = errorFromWire(/** @type {any} */ (message));
    out.error = {
      class: error.constructor.name,
      name: error.wireName,
      code: error.code,
      retryable: error.retryable,
      field: error.field ?? null,
      retry_after_ms: error.retryAfterMs ?? null,
    };
  }
  return out;
}

/** @param {any} request */
function handle(request) {
  switch (request.op) {
    case 'hello':
      return { ok: true, implementation: IMPLEMENTATION, protocol_version: 1 };
    case 'decode': {
      const reader = new FrameReader(request.max_frame ?? DEFAULT_MAX_FRAME);
      const frames = [];
      for (const chunk of request.chunks) frames.push(...reader.feed(Buffer.from(chunk, 'hex')));
      return { ok: true, frames: frames.map(describeFrame), buffered: reader.buffered };
    }
    case 'encode': {
      const payload = encodePayload(request.opcode, /** @type {any} */ (fromMirror(request.payload)), request.eos);
      return { ok: true, frame: encodeFrame(request.opcode, request.stream_id, payload, { eos: request.eos }).toString('hex') };
    }
    case 'roundtrip': {
      const frames = new FrameReader().feed(Buffer.from(request.frame, 'hex'));
      if (frames.length !== 1) return { ok: false, error: 'bad_frame', message: `${frames.length} frames, not 1` };
      const [frame] = frames;
      const payload = encodePayload(frame.opcode, decodeMessage(frame.opcode, frame.payload, frame.eos), frame.eos);
      return { ok: true, frame: encodeFrame(frame.opcode, frame.streamId, payload, { eos: frame.eos }).toString('hex') };
    }
    default:
      return { ok: false, error: 'unsupported', message: `unknown op ${request.op}` };
  }
}

/** @param {unknown} error */
function failure(error) {
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof FrameTooLarge) return { ok: false, error: 'frame_too_large', message };
  if (error instanceof BadFrame) return { ok: false, error: 'bad_frame', message };
  if (error instanceof PayloadError) return { ok: false, error: 'bad_payload', message };
  if (error instanceof EncodeError) return { ok: false, error: 'encode_error', message };
  return { ok: false, error: 'internal', message: error instanceof Error ? error.stack ?? message : message };
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (!line.trim()) continue;
  let answer;
  try {
    answer = handle(JSON.parse(line));
  } catch (error) {
    answer = failure(error);
  }
  process.stdout.write(`${JSON.stringify(answer)}\n`);
}
