// The contract, protocol/protocol.json (opcodes, errors, frame constants) and
// protocol/schema.json (every message's keys and types) as generated into
// src/contract.js (scripts/generate.js), and the schema-directed payload
// encoder built on it.
//
// Why schema-directed: JavaScript has one number type and no way to tell 1.0
// from 1, while the server encodes a float field as a float and an integer
// field as an integer. So a request is walked against its message shape and
// every number in a float position is wrapped in `Float`, every integer
// position is checked to hold an exact integer (number up to ±2^53, or
// BigInt), and byte strings must be Uint8Array, never text. `null` and
// `undefined` for a key of a message mean absent (spec/01-wire.md §2) and the
// key is left out; inside an `any` value, null is a real CBOR null.
//
// Values the schema does not describe (unknown keys, a union member that no
// discriminating key picks) are encoded as they are and left for the server to
// judge: it answers INVALID_ARGUMENT naming the key, and stays the one
// authority on validity. Decoding is lossless without the schema (cbor.js);
// the schema only turns the Float of an integral float back into a plain
// number where the key is typed float, so callers read `confidence: 1`.

//
// Times: an integer key typed `int[…] time` is nanoseconds since the epoch,
// and takes a Date too, sent as its milliseconds × 1,000,000 (BigInt, exact).
// An invalid Date, or a Date where the integer is no time, is an EncodeError.

import { decode, encode, Float, CborError } from './cbor.js';
import { PROTOCOL, SCHEMA } from './contract.js';
import { EncodeError } from './errors.js';

export { PROTOCOL, SCHEMA };

export const RESPONSE_BIT = PROTOCOL.frame.response_bit;
export const ERROR_OPCODE = PROTOCOL.frame.error_opcode;

/**
 * Whether `op` answers with a stream of frames ended by EOS: schema.json gives
 * exactly those opcodes a `stream_end` shape (spec/01-wire.md §7).
 * @param {OpcodeInfo} op
 */
export const isStreaming = (op) => op.streamEnd !== null;

/**
 * @typedef {object} OpcodeInfo
 * @property {string} name       HELLO, STATEMENT_CREATE, ...
 * @property {number} code
 * @property {string|null} permission
 * @property {boolean} control   may travel on stream 0
 * @property {string} request    the request's shape name in schema.json
 * @property {string} response   the response's shape name (each frame, for a streaming answer)
 * @property {string|null} streamEnd the shape of the EOS frame that ends a streaming answer
 */

/** @type {OpcodeInfo[]} */
export const OPCODES = PROTOCOL.opcodes.map((/** @type {any} */ row) => {
  const shapes = SCHEMA.opcodes.find((/** @type {any} */ s) => s.name === row.name);
  if (!shapes) throw new Error(`schema.json has no shapes for opcode ${row.name}`);
  return Object.freeze({
    name: row.name,
    code: Number.parseInt(row.code, 16),
    permission: row.permission,
    control: row.control,
    request: shapes.request,
    response: shapes.response,
    streamEnd: shapes.stream_end ?? null,
  });
});

/** The opcodes whose answer is a stream (SUBSCRIBE), read from schema.json's `stream_end` entries. */
export const STREAMING_OPCODES = new Set(OPCODES.filter(isStreaming).map((op) => op.name));

/** @type {Map<string, OpcodeInfo>} */
export const OPCODE_BY_NAME = new Map(OPCODES.map((op) => [op.name, op]));
/** @type {Map<number, OpcodeInfo>} */
export const OPCODE_BY_CODE = new Map(OPCODES.map((op) => [op.code, op]));

/**
 * The message shape a frame of `opcode` carries: a request's, a response's, or
 * ERROR's; the EOS frame of a streaming answer (SUBSCRIBE) has a shape of its own.
 * @param {number} opcode
 * @param {boolean} [eos] the frame's EOS flag
 * @returns {string|null} null for an opcode this client does not know
 */
export function shapeOf(opcode, eos = true) {
  if (opcode === ERROR_OPCODE) return 'ErrorMessage';
  const info = OPCODE_BY_CODE.get(opcode & ~RESPONSE_BIT);
  if (!info) return null;
  if (!(opcode & RESPONSE_BIT)) return info.request;
  return eos && info.streamEnd ? info.streamEnd : info.response;
}

// --- type descriptors compiled from schema.json's type texts ---------------------------

/**
 * @typedef {{kind: 'any'|'map'|'bool'|'text'|'bytes'|'int'|'float'}
 *   | {kind: 'time'}
 *   | {kind: 'array', item: Type}
 *   | {kind: 'shape', name: string}
 *   | {kind: 'union', members: Map<string, string>}} Type
 */

/** @type {Map<string, Type>} */
const TYPE_CACHE = new Map();

/**
 * Parse a schema type text: `bytes(16)`, `[Evidence](0..1024)`, `float[0..1] finite`,
 * `int[…] time`, `enum(a|b)`, `text /re/`, `EntityRef|NameRef`, `Statement`, `any`, `map`.
 * @param {string} text
 * @returns {Type}
 */
export function parseType(text) {
  const cached = TYPE_CACHE.get(text);
  if (cached) return cached;
  /** @type {Type} */
  let type;
  if (text.startsWith('[')) {
    // The element type runs to the matching bracket; a length bound may follow.
    let depth = 0;
    let end = 0;
    for (let i = 0; i < text.length; i++) {
      if (text[i] === '[') depth++;
      else if (text[i] === ']' && --depth === 0) {
        end = i;
        break;
      }
    }
    type = { kind: 'array', item: parseType(text.slice(1, end)) };
  } else if (text === 'any' || text === 'map' || text === 'bool') {
    type = { kind: text };
  } else if (/^int\b.* time$/.test(text)) {
    type = { kind: 'time' };
  } else if (/^(text|bytes|int|float)\b/.test(text)) {
    type = { kind: /** @type {'text'|'bytes'|'int'|'float'} */ (text.match(/^\w+/)?.[0]) };
  } else if (text.startsWith('enum(')) {
    type = { kind: 'text' };
  } else if (text.includes('|')) {
    // A union of shapes, each picked by its one required key (spec/01-wire.md §2).
    const members = new Map();
    for (const name of text.split('|')) {
      const required = shapeFields(name).filter((f) => f.required);
      if (required.length !== 1) throw new Error(`union member ${name} must have exactly one required key`);
      members.set(required[0].key, name);
    }
    type = { kind: 'union', members };
  } else {
    shapeFields(text); // fails early for an unknown name
    type = { kind: 'shape', name: text };
  }
  TYPE_CACHE.set(text, type);
  return type;
}

/**
 * @param {string} name
 * @returns {{key: string, required: boolean, type: string}[]}
 */
export function shapeFields(name) {
  const fields = SCHEMA.shapes[name];
  if (!fields) throw new Error(`schema.json has no shape ${name}`);
  return fields;
}

/** @type {Map<string, Map<string, Type>>} */
const SHAPE_TYPES = new Map();

/** @param {string} name */
function fieldTypes(name) {
  let types = SHAPE_TYPES.get(name);
  if (!types) {
    types = new Map(shapeFields(name).map((f) => [f.key, parseType(f.type)]));
    SHAPE_TYPES.set(name, types);
  }
  return types;
}

// --- schema-directed preparation -------------------------------------------------------

/** @param {string} path @param {string} key */
const child = (path, key) => (path ? `${path}.${key}` : key);

/** @param {unknown} value */
function describe(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (value instanceof Uint8Array) return 'a byte string';
  if (typeof value === 'object') return value.constructor?.name ?? 'an object';
  return `a ${typeof value}`;
}

/** @param {unknown} value */
function isRecord(value) {
  if (value === null || typeof value !== 'object') return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/**
 * The wire form of a vector: each value as a little-endian float32.
 * @param {Float32Array} values
 * @returns {Buffer}
 */
export function float32Bytes(values) {
  const out = Buffer.alloc(values.length * 4);
  values.forEach((value, i) => out.writeFloatLE(value, i * 4));
  return out;
}

/**
 * A vector as read from the wire (little-endian float32 values) as a Float32Array.
 * @param {Uint8Array} bytes
 * @returns {Float32Array}
 */
export function float32Values(bytes) {
  if (bytes.length % 4) throw new RangeError(`a vector is a whole number of float32 values, not ${bytes.length} bytes`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return Float32Array.from({ length: bytes.length / 4 }, (_, i) => view.getFloat32(i * 4, true));
}

/**
 * A time on the wire for a Date: its milliseconds since the epoch × 1,000,000,
 * as a BigInt (exact: a Date holds whole milliseconds).
 * @param {Date} date
 * @param {string} [path] the key path, for the error
 * @returns {bigint}
 */
export function nanosFromDate(date, path = '') {
  if (!(date instanceof Date)) throw new EncodeError(`must be a Date, got ${describe(date)}`, path);
  const ms = date.getTime();
  if (Number.isNaN(ms)) throw new EncodeError('is an invalid Date (its time is NaN)', path);
  return BigInt(ms) * 1_000_000n;
}

/**
 * The Date of a time on the wire (nanoseconds since the epoch), rounded down to
 * the millisecond, which is all a Date holds.
 * @param {number|bigint} nanos
 * @returns {Date}
 */
export function dateFromNanos(nanos) {
  if (typeof nanos === 'number' && Number.isInteger(nanos)) nanos = BigInt(nanos);
  if (typeof nanos !== 'bigint') throw new TypeError(`a time is integer nanoseconds, got ${describe(nanos)}`);
  const ns = /** @type {bigint} */ (nanos);
  const ms = ns / 1_000_000n - (ns % 1_000_000n < 0n ? 1n : 0n);
  return new Date(Number(ms));
}

/**
 * Walk `value` against shape `name` and return a CBOR-ready copy.
 * @param {string} name
 * @param {unknown} value
 * @param {string} [path]
 * @returns {Record<string, unknown>}
 */
export function prepareShape(name, value, path = '') {
  if (!isRecord(value)) throw new EncodeError(`must be a plain object (${name}), got ${describe(value)}`, path);
  const types = fieldTypes(name);
  /** @type {Record<string, unknown>} */
  const out = {};
  for (const [key, item] of Object.entries(/** @type {object} */ (value))) {
    // null and undefined mean absent for a message key: never sent.
    if (item === null || item === undefined) continue;
    const type = types.get(key);
    Object.defineProperty(out, key, {
      value: type ? prepare(type, item, child(path, key)) : item, // unknown: the server names it
      enumerable: true, writable: true, configurable: true,
    });
  }
  return out;
}

/**
 * @param {Type} type
 * @param {unknown} value
 * @param {string} path
 * @returns {unknown}
 */
function prepare(type, value, path) {
  switch (type.kind) {
    case 'any':
    case 'map':
      return value;
    case 'bool':
      if (typeof value !== 'boolean') throw new EncodeError(`must be a boolean, got ${describe(value)}`, path);
      return value;
    case 'text':
      if (typeof value !== 'string') throw new EncodeError(`must be a string, got ${describe(value)}`, path);
      return value;
    case 'bytes':
      // A vector is little-endian float32 values (spec/01-wire.md §2), whatever the host's byte order.
      if (value instanceof Float32Array) return float32Bytes(value);
      if (Array.isArray(value) && value.length > 0 && value.every((item) => typeof item === 'number')) {
        // Refused rather than guessed at: an array of numbers could mean float32 values or raw bytes.
        throw new EncodeError('must be a Uint8Array; for a vector of numbers pass a Float32Array', path);
      }
      // A hex or base64 string here is the classic mistake: the server wants raw bytes.
      if (!(value instanceof Uint8Array)) throw new EncodeError(`must be a Uint8Array, got ${describe(value)}`, path);
      return value;
    case 'time':
      if (value instanceof Date) return nanosFromDate(value, path);
      return prepare({ kind: 'int' }, value, path);
    case 'int':
      if (value instanceof Date) throw new EncodeError('must be an integer; a Date is taken only where a time is', path);
      if (typeof value === 'bigint') return value;
      if (typeof value === 'number' && Number.isInteger(value) && Math.abs(value) <= 2 ** 53) return value;
      if (typeof value === 'number' && Number.isInteger(value)) {
        throw new EncodeError(`${value} is beyond 2^53 and may have lost precision: pass a BigInt`, path);
      }
      throw new EncodeError(`must be an integer (number or BigInt), got ${describe(value)} ${String(value)}`, path);
    case 'float':
      if (value instanceof Float) return value;
      if (typeof value === 'number') return new Float(value);
      if (typeof value === 'bigint') {
        const number = Number(value);
        if (BigInt(number) !== value) throw new EncodeError(`${value} has no exact float form`, path);
        return new Float(number);
      }
      throw new EncodeError(`must be a number, got ${describe(value)}`, path);
    case 'array':
      if (!Array.isArray(value)) throw new EncodeError(`must be an array, got ${describe(value)}`, path);
      return value.map((item, i) => prepare(type.item, item, `${path}[${i}]`));
    case 'shape':
      return prepareShape(type.name, value, path);
    case 'union': {
      if (!isRecord(value)) throw new EncodeError(`must be a plain object, got ${describe(value)}`, path);
      const present = [...type.members.keys()].filter((k) => k in /** @type {object} */ (value));
      // None or several discriminating keys: sent as is, for the server to name the field.
      if (present.length !== 1) return value;
      return prepareShape(/** @type {string} */ (type.members.get(present[0])), value, path);
    }
    default:
      throw new Error(`unhandled type ${JSON.stringify(type)}`);
  }
}

/**
 * The payload bytes of a frame of `opcode` carrying `message`.
 * @param {number} opcode
 * @param {Record<string, unknown>} message
 * @param {boolean} [eos] the frame's EOS flag (it picks a stream end's shape)
 * @returns {Buffer}
 */
export function encodePayload(opcode, message, eos = true) {
  const shape = shapeOf(opcode, eos);
  return encode(shape === null ? message : prepareShape(shape, message));
}

/** A payload that is not one CBOR map with text keys. */
export class PayloadError extends Error {
  /** @param {string} message @param {unknown} [cause] */
  constructor(message, cause) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'PayloadError';
  }
}

/**
 * Decode a payload: one CBOR map with text keys; empty means the empty map (spec/01-wire.md §2).
 * @param {Uint8Array} payload
 * @returns {Record<string, unknown>}
 */
export function decodePayload(payload) {
  if (payload.length === 0) return {};
  let value;
  try {
    value = decode(payload);
  } catch (error) {
    if (error instanceof CborError) throw new PayloadError(error.message, error);
    throw error;
  }
  if (!isRecord(value)) throw new PayloadError(`payload must be a map with text keys, got ${describe(value)}`);
  return /** @type {Record<string, unknown>} */ (value);
}

/**
 * Settle a decoded message of shape `name`, in place: a key holding `null` is
 * absent (spec/01-wire.md §2: null means absent; the server omits absent keys,
 * so this only meets a peer that sends null), and the Float of every
 * float-typed key becomes a number.
 * @param {string} name
 * @param {Record<string, unknown>} message
 */
function unwrapShape(name, message) {
  const types = fieldTypes(name);
  for (const [key, value] of Object.entries(message)) {
    if (value === null) {
      delete message[key];
      continue;
    }
    const type = types.get(key);
    if (type) message[key] = unwrap(type, value);
  }
  return message;
}

/** @param {Type} type @param {unknown} value @returns {unknown} */
function unwrap(type, value) {
  if (type.kind === 'float') return value instanceof Float ? value.value : value;
  if (type.kind === 'array' && Array.isArray(value)) return value.map((item) => unwrap(type.item, item));
  if (!isRecord(value)) return value;
  const record = /** @type {Record<string, unknown>} */ (value);
  if (type.kind === 'shape') return unwrapShape(type.name, record);
  if (type.kind === 'union') {
    const present = [...type.members.keys()].filter((k) => k in record);
    if (present.length === 1) return unwrapShape(/** @type {string} */ (type.members.get(present[0])), record);
  }
  return value;
}

/**
 * Decode the payload of a frame of `opcode` into the message a caller reads:
 * floats in float-typed keys are plain numbers, even when integral, and a key
 * of a message (at any depth) that holds null is left out; inside an untyped
 * (`any`, `map`) value a null is kept.
 * @param {number} opcode
 * @param {Uint8Array} payload
 * @param {boolean} [eos] the frame's EOS flag (it picks a stream end's shape)
 * @returns {Record<string, any>}
 */
export function decodeMessage(opcode, payload, eos = true) {
  const message = decodePayload(payload);
  const shape = shapeOf(opcode, eos);
  return shape === null ? message : unwrapShape(shape, message);
}
