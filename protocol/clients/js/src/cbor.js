// Strict CBOR (RFC 8949) decoding and core deterministic encoding (§4.2.1),
// byte for byte what the server's brain/cbor.py produces.
//
// Decoding is the npm library cborg (pure JavaScript, no dependencies of its
// own): its decodeFirst() builds the values, accepts integer heads longer
// than needed (as the server does) and refuses duplicate keys, with a token
// reader of ours in front of its own that adds the server's rules (spec/01-wire.md §2,
// spec/01-wire.md §2): nesting depth, item counts, text size, counts checked
// against the bytes left, strict UTF-8 that keeps a leading U+FEFF, a break
// only where an indefinite item is open, no array or map as a map key, two-byte
// simple values from 32 only, and indefinite-length strings, which cborg does
// not read at all.
//
// Encoding is this module's own, small and exact: shortest integer heads; the
// shortest float (half, single, double) that keeps the value, NaN as f97e00;
// definite lengths only; map keys sorted bytewise by their encoded bytes;
// integers beyond 64 bits as bignums (tags 2, 3). cborg's encoder cannot give
// these bytes: it writes a half-precision subnormal that is not a power of two
// as a float32 (6.097555160522461e-05 is fa387fc000, where the server and RFC
// 8949 preferred serialization write f903ff), and its type encoders return
// tokens, not bytes, so no option reaches that choice (README.md, "CBOR").
//
// JavaScript values and CBOR, both ways:
//
//   CBOR                      JavaScript
//   unsigned / negative int   number when it is a safe integer, else BigInt
//   float (any width)         number; but Float when integral (1.0, -0.0), so that
//                             it encodes back to a float; `new Float(x)` forces a float
//   byte string               Buffer (a Uint8Array); any Uint8Array encodes
//   text string               string (must be well-formed UTF-16: no lone surrogates)
//   array                     Array
//   map, all keys text        plain object (undefined-valued keys are skipped)
//   map, other keys           Map
//   false, true, null         false, true, null
//   undefined                 undefined
//   tags 2/3 on bytes         BigInt; other tags are `Tag`
//   other simple values       `Simple`
//
// JavaScript has one number type, so an untyped number is encoded as an
// integer when it is integral and within ±2^53, and as a float otherwise.
// Where the protocol wants a float, the schema-directed layer (wire.js) wraps
// the number in `Float`, so `confidence: 1` still travels as the float 1.0;
// on the way in, it unwraps the Float of an integral float in a float-typed key,
// so a caller reads `confidence: 1`. Only in untyped (`any`) positions, such
// as PING's nonce, does an integral float reach the caller as a Float.
//
// One deliberate difference from the server: keys are compared as CBOR items,
// so {1: a, true: b} has two distinct keys here (RFC 8949 §5.6), while the
// Python decoder calls them duplicates.

import { Token, Tokenizer, Type, decodeFirst as cborgDecodeFirst } from 'cborg';

/** Deepest nesting of arrays, maps and tags accepted (spec/01-wire.md §2). */
export const MAX_DEPTH = 32;
/** Most items in one array (spec/01-wire.md §2). */
export const MAX_ARRAY_LENGTH = 100_000;
/** Most pairs in one map: the array bound, for the same reason. */
export const MAX_MAP_LENGTH = 100_000;
/** Largest text string in UTF-8 bytes (spec/01-wire.md §2). */
export const MAX_TEXT_BYTES = 1024 * 1024;
/** Largest integer magnitude JSON and the wire's mirror carry as a plain number. */
export const MAX_PLAIN_INTEGER = 2 ** 53;

const BREAK = 0xff;
const U64_LIMIT = 1n << 64n;

/** A number that must be encoded as a CBOR float even when it is integral. */
export class Float {
  /** @param {number} value */
  constructor(value) {
    if (typeof value !== 'number') throw new TypeError(`Float needs a number, got ${typeof value}`);
    this.value = value;
    Object.freeze(this);
  }
}

/** Shorthand for `new Float(value)`. @param {number} value */
export const float = (value) => new Float(value);

/** A tagged item this layer gives no meaning to (RFC 8949 §3.4). */
export class Tag {
  /** @param {number|bigint} tag @param {unknown} value */
  constructor(tag, value) {
    this.tag = tag;
    this.value = value;
    Object.freeze(this);
  }
}

/** A simple value other than false, true, null and undefined (RFC 8949 §3.3). */
export class Simple {
  /** @param {number} value */
  constructor(value) {
    this.value = value;
    Object.freeze(this);
  }
}

/** The input is not one well-formed CBOR item within the limits. */
export class CborError extends Error {
  /** @param {string} message @param {number} [offset] */
  constructor(message, offset) {
    super(`payload is not valid CBOR: ${message}`);
    this.name = 'CborError';
    this.offset = offset;
  }
}

// --- encoding -------------------------------------------------------------------

const textEncoder = new TextEncoder();
const scratch = new DataView(new ArrayBuffer(8));

/**
 * The head of an item: major type and argument, in the fewest bytes.
 * @param {number} major @param {number|bigint} value non-negative, below 2^64
 * @returns {Uint8Array}
 */
function head(major, value) {
  const top = major << 5;
  if (typeof value === 'number' && value < 24) return Uint8Array.of(top | value);
  if (typeof value === 'number' && value < 0x100) return Uint8Array.of(top | 24, value);
  if (typeof value === 'number' && value < 0x10000) {
    return Uint8Array.of(top | 25, value >>> 8, value & 0xff);
  }
  if (typeof value === 'number' && value < 0x100000000) {
    const out = new Uint8Array(5);
    out[0] = top | 26;
    new DataView(out.buffer).setUint32(1, value);
    return out;
  }
  const big = BigInt(value);
  if (big < 0x100000000n) return head(major, Number(big));
  const out = new Uint8Array(9);
  out[0] = top | 27;
  new DataView(out.buffer).setBigUint64(1, big);
  return out;
}

/**
 * The 16-bit half-precision pattern of `value`, or null when a half cannot hold
 * it exactly. `value` must already be exact as a float32.
 * @param {number} value
 */
function halfBits(value) {
  scratch.setFloat32(0, value);
  const bits = scratch.getUint32(0);
  const sign = (bits >>> 16) & 0x8000;
  const exponent = (bits >>> 23) & 0xff;
  const mantissa = bits & 0x7fffff;
  if (exponent === 0) return mantissa === 0 ? sign : null; // ±0, or a float32 subnormal
  if (exponent === 0xff) return mantissa === 0 ? sign | 0x7c00 : null; // ±Infinity
  const unbiased = exponent - 127;
  if (unbiased > 15) return null;
  if (unbiased >= -14) {
    // A normal half keeps 10 of the 23 mantissa bits.
    if (mantissa & 0x1fff) return null;
    return sign | ((unbiased + 15) << 10) | (mantissa >>> 13);
  }
  if (unbiased < -24) return null;
  // A subnormal half is k·2^-24 for k in 1..1023.
  const significand = mantissa | 0x800000;
  const shift = -(unbiased + 1);
  if (significand & ((1 << shift) - 1)) return null;
  return sign | (significand >>> shift);
}

/**
 * The shortest float encoding that keeps `value` (RFC 8949 §4.2.1; the server's rule).
 * @param {number} value
 * @returns {Uint8Array}
 */
export function encodeFloat(value) {
  if (Number.isNaN(value)) return Uint8Array.of(0xf9, 0x7e, 0x00);
  if (Math.fround(value) === value) {
    const half = halfBits(value);
    if (half !== null) return Uint8Array.of(0xf9, half >>> 8, half & 0xff);
    const out = new Uint8Array(5);
    out[0] = 0xfa;
    new DataView(out.buffer).setFloat32(1, value);
    return out;
  }
  const out = new Uint8Array(9);
  out[0] = 0xfb;
  new DataView(out.buffer).setFloat64(1, value);
  return out;
}

/** @param {bigint} value @returns {Uint8Array[]} */
function encodeBigInt(value) {
  if (value >= 0n && value < U64_LIMIT) return [head(0, value)];
  if (value < 0n && value >= -U64_LIMIT) return [head(1, -1n - value)];
  const [tag, magnitude] = value >= 0n ? [2, value] : [3, -1n - value];
  let hex = magnitude.toString(16);
  if (hex.length % 2) hex = `0${hex}`;
  const raw = Buffer.from(hex, 'hex');
  return [head(6, tag), head(2, raw.length), raw];
}

/** @param {unknown} value */
function isPlainObject(value) {
  if (value === null || typeof value !== 'object') return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/**
 * @param {unknown} value
 * @param {Uint8Array[]} out
 * @param {number} depth
 */
function encodeInto(value, out, depth) {
  if (depth > MAX_DEPTH) throw new TypeError(`value nests deeper than ${MAX_DEPTH}`);
  if (value === null) out.push(Uint8Array.of(0xf6));
  else if (value === undefined) out.push(Uint8Array.of(0xf7));
  else if (value === true) out.push(Uint8Array.of(0xf5));
  else if (value === false) out.push(Uint8Array.of(0xf4));
  else if (typeof value === 'number') {
    if (Number.isInteger(value) && Math.abs(value) <= MAX_PLAIN_INTEGER) {
      out.push(...encodeBigInt(BigInt(value)));
    } else {
      out.push(encodeFloat(value));
    }
  } else if (typeof value === 'bigint') out.push(...encodeBigInt(value));
  else if (value instanceof Float) out.push(encodeFloat(value.value));
  else if (typeof value === 'string') {
    if (!value.isWellFormed()) {
      // TextEncoder would silently turn a lone surrogate into U+FFFD.
      throw new TypeError('text holds a lone surrogate; it has no UTF-8 form');
    }
    const raw = textEncoder.encode(value);
    out.push(head(3, raw.length), raw);
  } else if (value instanceof Uint8Array) {
    out.push(head(2, value.length), value);
  } else if (Array.isArray(value)) {
    out.push(head(4, value.length));
    for (const item of value) encodeInto(item, out, depth + 1);
  } else if (value instanceof Map) {
    encodePairs([...value.entries()], out, depth);
  } else if (value instanceof Tag) {
    out.push(head(6, value.tag));
    encodeInto(value.value, out, depth + 1);
  } else if (value instanceof Simple) {
    out.push(value.value < 24 ? Uint8Array.of(0xe0 | value.value) : Uint8Array.of(0xf8, value.value));
  } else if (isPlainObject(value)) {
    const pairs = Object.entries(/** @type {object} */ (value)).filter(([, v]) => v !== undefined);
    encodePairs(pairs, out, depth);
  } else {
    const what = value?.constructor?.name ?? typeof value;
    throw new TypeError(`cannot encode ${what} as CBOR`);
  }
}

/**
 * A map: keys sorted bytewise by their deterministic encoding (RFC 8949 §4.2.1).
 * @param {[unknown, unknown][]} pairs @param {Uint8Array[]} out @param {number} depth
 */
function encodePairs(pairs, out, depth) {
  const keyed = pairs.map(([k, v]) => /** @type {[Buffer, unknown]} */ ([encode(k), v]));
  keyed.sort((a, b) => Buffer.compare(a[0], b[0]));
  for (let i = 1; i < keyed.length; i++) {
    if (Buffer.compare(keyed[i - 1][0], keyed[i][0]) === 0) {
      throw new TypeError('two map keys have the same encoding');
    }
  }
  out.push(head(5, keyed.length));
  for (const [key, item] of keyed) {
    out.push(key);
    encodeInto(item, out, depth + 1);
  }
}

/**
 * Encode `value` deterministically (RFC 8949 §4.2.1).
 * @param {unknown} value
 * @returns {Buffer}
 */
export function encode(value) {
  /** @type {Uint8Array[]} */
  const out = [];
  encodeInto(value, out, 1);
  return Buffer.concat(out);
}

// --- decoding -------------------------------------------------------------------

const textDecoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }); // keep a leading U+FEFF

/** @param {bigint|number} value @returns {number|bigint} */
function narrow(value) {
  const big = BigInt(value);
  return big >= BigInt(Number.MIN_SAFE_INTEGER) && big <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : big;
}

/** @param {Uint8Array} raw @param {number} start */
function text(raw, start) {
  if (raw.length > MAX_TEXT_BYTES) throw new CborError(`text at offset ${start} is over ${MAX_TEXT_BYTES} bytes`, start);
  try {
    return textDecoder.decode(raw);
  } catch {
    throw new CborError(`text at offset ${start} is not valid UTF-8`, start);
  }
}

/**
 * An array, map or tag whose items are still being read.
 * @typedef {{items: number, done: number, map: boolean, key: boolean, start: number}} Open
 */

/**
 * cborg's token reader with the server's rules in front of it. cborg builds the
 * values from these tokens; this reader sees every token first, in order, so it
 * knows how deep each item is, whether it is a map key, and which indefinite
 * item a break closes.
 */
class StrictTokenizer extends Tokenizer {
  /** @param {Uint8Array} data @param {object} options */
  constructor(data, options) {
    super(data, options);
    /** @type {Open[]} */
    this.open = [];
  }

  /** @returns {Token} */
  next() {
    const start = this._pos;
    const top = this.open.at(-1);
    const asKey = top !== undefined && ((top.map && top.done % 2 === 0) || top.key);
    const byte = this.data[start];
    if (byte === BREAK) return this.closeIndefinite(top, start);
    if (this.open.length >= MAX_DEPTH) throw new CborError(`nesting deeper than ${MAX_DEPTH}`, start);
    if (top && top.items === Infinity && top.done >= (top.map ? 2 * MAX_MAP_LENGTH : MAX_ARRAY_LENGTH)) {
      throw new CborError(`${top.map ? 'map' : 'array'} at offset ${top.start} has over ${top.map ? MAX_MAP_LENGTH : MAX_ARRAY_LENGTH} ${top.map ? 'pairs' : 'items'}`, top.start);
    }
    let token;
    if (byte === 0x5f || byte === 0x7f) token = this.indefiniteString(start, byte >> 5);
    else if (byte >= 0xe0 && byte <= 0xf3) token = this.simple(start, byte & 0x1f, 1);
    else if (byte === 0xf8) {
      if (start + 1 >= this.data.length) throw new CborError(`item at offset ${start} runs past the end of the payload`, start);
      const value = this.data[start + 1];
      if (value < 32) throw new CborError(`two-byte simple value ${value} at offset ${start} (must be >= 32)`, start);
      token = this.simple(start, value, 2);
    } else {
      try {
        token = super.next();
      } catch (error) {
        throw fromCborg(error, start);
      }
      token = this.checked(token, start);
    }
    const { type } = token;
    if (type === Type.array || type === Type.map) {
      if (asKey) throw new CborError(`map key at offset ${start} is an array or map`, start);
      const map = type === Type.map;
      const count = token.value;
      if (count !== Infinity) {
        const limit = map ? MAX_MAP_LENGTH : MAX_ARRAY_LENGTH;
        const what = map ? 'map' : 'array';
        if (count > limit) throw new CborError(`${what} at offset ${start} has over ${limit} ${map ? 'pairs' : 'items'}`, start);
        // Each item takes at least one byte: a count past the input is a lie.
        if ((map ? 2 : 1) * count > this.data.length - this._pos) {
          throw new CborError(`${what} at offset ${start} runs past the end of the payload`, start);
        }
      }
      this.begin(map ? 2 * count : count, map, false, start);
    } else if (type === Type.tag) {
      this.begin(1, false, asKey, start);
    } else {
      this.completed();
    }
    return token;
  }

  /**
   * The token cborg read, made to follow the server's rules and this module's values.
   * @param {Token} token @param {number} start
   */
  checked(token, start) {
    const { type } = token;
    if (type === Type.string) {
      // cborg's shared token for the empty text (0x60) carries no bytes.
      const raw = /** @type {any} */ (token).byteValue ?? new Uint8Array(0);
      return new Token(Type.string, text(raw, start), token.encodedLength);
    }
    if (type === Type.bytes) {
      // A copy: cborg's value is a view of the frame buffer, which the reader reuses.
      return new Token(Type.bytes, Buffer.from(token.value), token.encodedLength);
    }
    if (type === Type.float && typeof token.value === 'number') {
      return new Token(Type.float, floatValue(token.value), token.encodedLength);
    }
    if (type === Type.uint || type === Type.negint) {
      return new Token(type, narrow(token.value), token.encodedLength);
    }
    return token;
  }

  /** @param {number} start @param {number} value @param {number} length */
  simple(start, value, length) {
    this._pos = start + length;
    return new Token(Type.float, new Simple(value), length);
  }

  /** @param {Open|undefined} top @param {number} start */
  closeIndefinite(top, start) {
    if (!top || top.items !== Infinity) throw new CborError(`unexpected break at offset ${start}`, start);
    if (top.map && top.done % 2 === 1) throw new CborError(`map at offset ${top.start} ends without a value`, top.start);
    this._pos = start + 1;
    this.open.pop();
    this.completed();
    return new Token(Type.break, undefined, 1);
  }

  /**
   * A text or byte string of definite chunks ended by a break, which cborg does not read.
   * @param {number} start @param {number} major
   */
  indefiniteString(start, major) {
    const { data } = this;
    let pos = start + 1;
    /** @type {Uint8Array[]} */
    const chunks = [];
    let total = 0;
    for (;;) {
      if (pos >= data.length) throw new CborError(`indefinite string at offset ${start} has no break`, start);
      if (data[pos] === BREAK) {
        pos++;
        break;
      }
      const chunkStart = pos;
      const initial = data[pos];
      const info = initial & 0x1f;
      if (initial >> 5 !== major || info > 27) {
        throw new CborError(`bad chunk in indefinite string at offset ${chunkStart}`, chunkStart);
      }
      const width = info < 24 ? 0 : 1 << (info - 24);
      if (pos + 1 + width > data.length) throw new CborError(`item at offset ${chunkStart} runs past the end of the payload`, chunkStart);
      let length = info;
      if (width) {
        const view = new DataView(data.buffer, data.byteOffset + pos + 1, width);
        length = width === 8 ? Number(view.getBigUint64(0)) : width === 4 ? view.getUint32(0) : width === 2 ? view.getUint16(0) : view.getUint8(0);
      }
      pos += 1 + width;
      if (length > data.length - pos) throw new CborError(`item at offset ${chunkStart} runs past the end of the payload`, chunkStart);
      const raw = data.subarray(pos, pos + length);
      pos += length;
      total += length;
      if (major === 3) {
        if (total > MAX_TEXT_BYTES) throw new CborError(`text at offset ${start} is over ${MAX_TEXT_BYTES} bytes`, start);
        text(raw, chunkStart); // each chunk must be valid UTF-8 on its own (RFC 8949 §3.2.3)
      }
      chunks.push(raw);
    }
    this._pos = pos;
    const joined = Buffer.concat(chunks);
    return major === 3
      ? new Token(Type.string, text(joined, start), pos - start)
      : new Token(Type.bytes, joined, pos - start);
  }

  /** @param {number} items @param {boolean} map @param {boolean} key @param {number} start */
  begin(items, map, key, start) {
    if (items === 0) this.completed();
    else this.open.push({ items, done: 0, map, key, start });
  }

  /** One item is complete: count it in the container it belongs to, closing containers that are full. */
  completed() {
    for (;;) {
      const top = this.open.at(-1);
      if (!top) return;
      top.done += 1;
      if (top.done < top.items) return;
      this.open.pop();
    }
  }
}

/**
 * An error cborg raised, as a CborError.
 * @param {unknown} error @param {number} offset
 */
function fromCborg(error, offset) {
  if (error instanceof CborError) return error;
  const message = (error instanceof Error ? error.message : String(error)).replace(/^CBOR decode error: /, '');
  return new CborError(`${message} (at offset ${offset})`, offset);
}

/**
 * A decoded float as a value that encodes back to a float: a plain number
 * unless encode() would take that number for an integer (integral, within
 * ±2^53, or -0), in which case it stays wrapped in Float. Decoding is thus
 * lossless; wire.js unwraps the Float wherever the schema says the key is a float.
 * @param {number} value
 */
function floatValue(value) {
  return Number.isInteger(value) && Math.abs(value) <= MAX_PLAIN_INTEGER ? new Float(value) : value;
}

/**
 * What cborg gives for a tag: tags 2 and 3 on a byte string are bignums; any
 * other tag is kept as a Tag, so nothing is lost.
 * @param {string} key the tag number, as cborg looks it up
 */
function tagDecoder(key) {
  const number = narrow(BigInt(key));
  return (/** @type {() => unknown} */ content) => {
    const value = content();
    if ((number === 2 || number === 3) && value instanceof Uint8Array) {
      const magnitude = value.length ? BigInt(`0x${Buffer.from(value).toString('hex')}`) : 0n;
      return narrow(number === 2 ? magnitude : -1n - magnitude);
    }
    return new Tag(number, value);
  };
}

/** Every tag number has a decoder (cborg refuses tags it has none for). */
const ALL_TAGS = new Proxy({}, {
  get: (_target, key) => (typeof key === 'string' && /^\d+$/.test(key) ? tagDecoder(key) : undefined),
});

const DECODE_OPTIONS = Object.freeze({
  strict: false, // like the server, accept an integer head longer than needed
  allowIndefinite: true,
  allowUndefined: true,
  allowBigInt: true,
  useMaps: true, // keys of any type; maps whose keys are all text become objects below
  rejectDuplicateMapKeys: true,
  retainStringBytes: true, // so that text is decoded again, strictly, by StrictTokenizer
  tags: ALL_TAGS,
});

/**
 * The value cborg built, in this module's forms: a map whose keys are all text
 * is a plain object (a "__proto__" key stays a key), other maps stay Maps, with
 * duplicate keys that Map cannot see (equal byte strings, floats, tags) refused.
 * @param {unknown} value
 * @returns {unknown}
 */
function settle(value) {
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = settle(value[i]);
    return value;
  }
  if (value instanceof Tag) return new Tag(value.tag, settle(value.value));
  if (!(value instanceof Map)) return value;
  if ([...value.keys()].every((key) => typeof key === 'string')) {
    /** @type {Record<string, unknown>} */
    const result = {};
    for (const [key, item] of value) {
      // Assigning "__proto__" would set the prototype instead of a key.
      Object.defineProperty(result, key, { value: settle(item), enumerable: true, writable: true, configurable: true });
    }
    return result;
  }
  const seen = new Set();
  const result = new Map();
  for (const [rawKey, item] of value) {
    const key = settle(rawKey);
    if (typeof key === 'object' && key !== null) {
      const identity = key instanceof Simple ? `simple ${key.value}` : encode(key).toString('hex');
      if (seen.has(identity)) throw new CborError(`duplicate map key of type ${key.constructor.name}`);
      seen.add(identity);
    }
    result.set(key, settle(item));
  }
  return result;
}

/**
 * Decode exactly one CBOR item from `data`; trailing bytes are an error.
 * @param {Uint8Array} data
 * @returns {unknown}
 */
export function decode(data) {
  const bytes = data instanceof Uint8Array && data.constructor !== Uint8Array
    ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
    : data;
  const tokenizer = new StrictTokenizer(bytes, DECODE_OPTIONS);
  let value;
  try {
    [value] = cborgDecodeFirst(bytes, { ...DECODE_OPTIONS, tokenizer });
  } catch (error) {
    if (error instanceof CborError) throw error;
    const message = error instanceof Error ? error.message : String(error);
    if (/repeat map key/.test(message)) {
      throw new CborError(`duplicate map key ${message.replace(/^.*repeat map key /, '')}`);
    }
    if (/not enough entries|did not find any content/.test(message)) {
      throw new CborError(`payload ends where an item was expected (offset ${tokenizer.pos()})`, tokenizer.pos());
    }
    throw fromCborg(error, tokenizer.pos());
  }
  const end = tokenizer.pos();
  if (end !== bytes.length) {
    throw new CborError(`${bytes.length - end} bytes follow the item at offset ${end}`, end);
  }
  return settle(value);
}
