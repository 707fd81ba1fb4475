// The JSON mirror of a payload (protocol/bless.py), both ways, plus the one
// extension the conformance runner uses (protocol/conformance/README.md):
//
//   {"$bytes": "<hex>"}       a byte string
//   {"$int": "<decimal>"}     an integer beyond ±2^53
//   {"$float": "<text>"}      a float JSON cannot carry as one: integral (1.0
//                             reads back as 1 in JavaScript), -0.0, NaN,
//                             Infinity, -Infinity

import { Float, MAX_PLAIN_INTEGER } from './cbor.js';

/** @param {unknown} value @param {string[]} keys */
const only = (value, keys) => {
  const own = Object.keys(/** @type {object} */ (value));
  return own.length === keys.length && keys.every((k) => own.includes(k));
};

/**
 * Mirror JSON (already parsed) to the values the encoder takes.
 * @param {unknown} value
 * @returns {unknown}
 */
export function fromMirror(value) {
  if (Array.isArray(value)) return value.map(fromMirror);
  if (value === null || typeof value !== 'object') return value;
  if (only(value, ['$bytes'])) return Buffer.from(/** @type {any} */ (value).$bytes, 'hex');
  if (only(value, ['$int'])) return BigInt(/** @type {any} */ (value).$int);
  if (only(value, ['$float'])) return new Float(Number(/** @type {any} */ (value).$float));
  /** @type {Record<string, unknown>} */
  const out = {};
  for (const [key, item] of Object.entries(value)) {
    Object.defineProperty(out, key, { value: fromMirror(item), enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/** @param {number} value */
function floatText(value) {
  if (Object.is(value, -0)) return '-0.0';
  return String(value); // NaN, Infinity, -Infinity, or the shortest decimal that reads back exactly
}

/**
 * Decoded values to mirror JSON (to be JSON.stringify'd).
 * @param {unknown} value
 * @returns {unknown}
 */
export function toMirror(value) {
  if (value instanceof Uint8Array) return { $bytes: Buffer.from(value).toString('hex') };
  if (typeof value === 'bigint') {
    const plain = value >= -BigInt(MAX_PLAIN_INTEGER) && value <= BigInt(MAX_PLAIN_INTEGER);
    return plain ? Number(value) : { $int: value.toString() };
  }
  if (value instanceof Float) return { $float: floatText(value.value) };
  if (typeof value === 'number') {
    return Number.isFinite(value) && !Object.is(value, -0) ? value : { $float: floatText(value) };
  }
  if (Array.isArray(value)) return value.map(toMirror);
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'object' && (Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null)) {
    /** @type {Record<string, unknown>} */
    const out = {};
    for (const [key, item] of Object.entries(value)) {
      Object.defineProperty(out, key, { value: toMirror(item), enumerable: true, writable: true, configurable: true });
    }
    return out;
  }
  throw new TypeError(`no JSON mirror for ${value?.constructor?.name ?? typeof value}`);
}
