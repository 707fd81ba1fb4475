// Strict CBOR (RFC 8949) decoding and core deterministic encoding (§4.2.1),
// byte for byte what the server's brain/wire/cbor.py produces.
//
// Encoding: shortest integer heads; the shortest float (half, single, double)
// that keeps the value, NaN as f97e00; definite lengths only; map keys sorted
// bytewise by their encoded bytes; integers beyond 64 bits as bignums (tags 2, 3).
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
// Decoding bounds everything a hostile peer could make us spend, with the
// server's limits, and rejects what the server rejects (WIRE.md §2,
// spec/01-wire.md §2). One deliberate difference: keys are compared as CBOR
// items, so {1: a, true: b} has two distinct keys here (RFC 8949 §5.6), while
// the Python decoder calls them duplicates.

/** Deepest nesting of arrays, maps and tags accepted (WIRE.md §2). */
export const MAX_DEPTH = 32;
/** Most items in one array (WIRE.md §2). */
export const MAX_ARRAY_LENGTH = 100_000;
/** Most pairs in one map: the array bound, for the same reason. */
export const MAX_MAP_LENGTH = 100_000;
/** Largest text string in UTF-8 bytes (WIRE.md §2). */
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

/** @param {bigint} value @returns {number|bigint} */
function narrow(value) {
  return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER)
    ? Number(value)
    : value;
}

/** @param {unknown} value */
function isContainer(value) {
  return Array.isArray(value) || value instanceof Map || isPlainObject(value);
}

class Decoder {
  /** @param {Uint8Array} data */
  constructor(data) {
    this.data = data;
    this.view = new DataView(data.buffer, data.byteOffset, data.byteLength);
    this.pos = 0;
    this.end = data.length;
  }

  /** @param {number|bigint} count */
  take(count) {
    if (count > this.end - this.pos) {
      throw new CborError(`item at offset ${this.pos} runs past the end of the payload`, this.pos);
    }
    const start = this.pos;
    this.pos += Number(count);
    return this.data.subarray(start, this.pos);
  }

  /** @returns {[number, number, number|bigint|null]} major, info, argument (null: indefinite) */
  head() {
    if (this.pos >= this.end) {
      throw new CborError(`payload ends where an item was expected (offset ${this.pos})`, this.pos);
    }
    const initial = this.data[this.pos++];
    const major = initial >> 5;
    const info = initial & 0x1f;
    if (info < 24) return [major, info, info];
    if (info === 24) return [major, info, this.take(1)[0]];
    if (info === 25) {
      this.take(2);
      return [major, info, this.view.getUint16(this.pos - 2)];
    }
    if (info === 26) {
      this.take(4);
      return [major, info, this.view.getUint32(this.pos - 4)];
    }
    if (info === 27) {
      this.take(8);
      return [major, info, narrow(this.view.getBigUint64(this.pos - 8))];
    }
    if (info === 31) return [major, info, null];
    throw new CborError(`reserved additional information ${info} at offset ${this.pos - 1}`, this.pos - 1);
  }

  /** @param {number} depth @returns {unknown} */
  item(depth) {
    if (depth > MAX_DEPTH) throw new CborError(`nesting deeper than ${MAX_DEPTH}`, this.pos);
    const start = this.pos;
    const [major, info, arg] = this.head();
    switch (major) {
      case 0:
        if (arg === null) throw new CborError(`indefinite length on an integer at offset ${start}`, start);
        return arg;
      case 1:
        if (arg === null) throw new CborError(`indefinite length on an integer at offset ${start}`, start);
        return narrow(-1n - BigInt(arg));
      case 2:
      case 3:
        return this.string(major, arg, start);
      case 4:
        return this.array(arg, depth, start);
      case 5:
        return this.map(arg, depth, start);
      case 6:
        if (arg === null) throw new CborError(`indefinite length on a tag at offset ${start}`, start);
        return this.tag(arg, depth);
      default:
        return this.simpleOrFloat(info, arg, start);
    }
  }

  /** @param {Uint8Array} raw @param {number} start */
  static text(raw, start) {
    if (raw.length > MAX_TEXT_BYTES) {
      throw new CborError(`text at offset ${start} is over ${MAX_TEXT_BYTES} bytes`, start);
    }
    try {
      return textDecoder.decode(raw);
    } catch {
      throw new CborError(`text at offset ${start} is not valid UTF-8`, start);
    }
  }

  /** @param {number} major @param {number|bigint|null} arg @param {number} start */
  string(major, arg, start) {
    if (arg !== null) {
      const raw = this.take(arg);
      return major === 3 ? Decoder.text(raw, start) : Buffer.from(raw);
    }
    /** @type {(string|Uint8Array)[]} */
    const chunks = [];
    let total = 0;
    for (;;) {
      if (this.pos >= this.end) throw new CborError(`indefinite string at offset ${start} has no break`, start);
      if (this.data[this.pos] === BREAK) {
        this.pos++;
        break;
      }
      const chunkStart = this.pos;
      const [chunkMajor, , chunkLength] = this.head();
      if (chunkMajor !== major || chunkLength === null) {
        throw new CborError(`bad chunk in indefinite string at offset ${chunkStart}`, chunkStart);
      }
      const raw = this.take(chunkLength);
      total += raw.length;
      if (major === 3 && total > MAX_TEXT_BYTES) {
        throw new CborError(`text at offset ${start} is over ${MAX_TEXT_BYTES} bytes`, start);
      }
      // Each chunk of a text string must be valid UTF-8 on its own (RFC 8949 §3.2.3).
      chunks.push(major === 3 ? Decoder.text(raw, chunkStart) : raw);
    }
    if (major === 3) return chunks.join('');
    return Buffer.concat(/** @type {Uint8Array[]} */ (chunks));
  }

  /** @param {number|bigint|null} arg @param {number} depth @param {number} start */
  array(arg, depth, start) {
    const items = [];
    if (arg !== null) {
      if (arg > MAX_ARRAY_LENGTH) throw new CborError(`array at offset ${start} has over ${MAX_ARRAY_LENGTH} items`, start);
      // Each item takes at least one byte: a count past the input is a lie.
      if (arg > this.end - this.pos) throw new CborError(`array at offset ${start} runs past the end of the payload`, start);
      for (let i = 0; i < arg; i++) items.push(this.item(depth + 1));
      return items;
    }
    for (;;) {
      if (this.pos >= this.end) throw new CborError(`indefinite array at offset ${start} has no break`, start);
      if (this.data[this.pos] === BREAK) {
        this.pos++;
        return items;
      }
      if (items.length >= MAX_ARRAY_LENGTH) throw new CborError(`array at offset ${start} has over ${MAX_ARRAY_LENGTH} items`, start);
      items.push(this.item(depth + 1));
    }
  }

  /** @param {number|bigint|null} arg @param {number} depth @param {number} start */
  map(arg, depth, start) {
    /** @type {[unknown, unknown][]} */
    const pairs = [];
    const seen = new Set();
    const pair = () => {
      const keyPos = this.pos;
      const key = this.item(depth + 1);
      if (isContainer(key) || (key instanceof Tag && isContainer(key.value))) {
        throw new CborError(`map key at offset ${keyPos} is an array or map`, keyPos);
      }
      // Text keys by value; others by their canonical encoding (1, 1.0 and true differ).
      const identity = typeof key === 'string' ? `t${key}` : `c${encode(key).toString('hex')}`;
      if (seen.has(identity)) {
        const shown = typeof key === 'string' ? JSON.stringify(key) : `of type ${typeof key}`;
        throw new CborError(`duplicate map key ${shown} at offset ${keyPos}`, keyPos);
      }
      seen.add(identity);
      if (this.pos >= this.end) throw new CborError(`map at offset ${start} ends without a value`, start);
      pairs.push([key, this.item(depth + 1)]);
    };
    if (arg !== null) {
      if (arg > MAX_MAP_LENGTH) throw new CborError(`map at offset ${start} has over ${MAX_MAP_LENGTH} pairs`, start);
      if (2 * Number(arg) > this.end - this.pos) throw new CborError(`map at offset ${start} runs past the end of the payload`, start);
      for (let i = 0; i < arg; i++) pair();
    } else {
      for (;;) {
        if (this.pos >= this.end) throw new CborError(`indefinite map at offset ${start} has no break`, start);
        if (this.data[this.pos] === BREAK) {
          this.pos++;
          break;
        }
        if (pairs.length >= MAX_MAP_LENGTH) throw new CborError(`map at offset ${start} has over ${MAX_MAP_LENGTH} pairs`, start);
        pair();
      }
    }
    if (!pairs.every(([k]) => typeof k === 'string')) return new Map(pairs);
    /** @type {Record<string, unknown>} */
    const result = {};
    for (const [key, value] of pairs) {
      // Assigning "__proto__" would set the prototype instead of a key.
      Object.defineProperty(result, /** @type {string} */ (key), {
        value, enumerable: true, writable: true, configurable: true,
      });
    }
    return result;
  }

  /** @param {number|bigint} number @param {number} depth */
  tag(number, depth) {
    const value = this.item(depth + 1);
    if ((number === 2 || number === 3) && value instanceof Uint8Array) {
      const magnitude = value.length ? BigInt(`0x${Buffer.from(value).toString('hex')}`) : 0n;
      return narrow(number === 2 ? magnitude : -1n - magnitude);
    }
    return new Tag(number, value);
  }

  /** @param {number} info @param {number|bigint|null} arg @param {number} start */
  simpleOrFloat(info, arg, start) {
    if (info < 20) return new Simple(info);
    if (info === 20) return false;
    if (info === 21) return true;
    if (info === 22) return null;
    if (info === 23) return undefined;
    if (info === 24) {
      if (/** @type {number} */ (arg) < 32) {
        throw new CborError(`two-byte simple value ${arg} at offset ${start} (must be >= 32)`, start);
      }
      return new Simple(/** @type {number} */ (arg));
    }
    if (info === 25) return floatValue(decodeHalf(/** @type {number} */ (arg)));
    if (info === 26) return floatValue(this.view.getFloat32(start + 1));
    if (info === 27) return floatValue(this.view.getFloat64(start + 1));
    throw new CborError(`unexpected break at offset ${start}`, start);
  }
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

/** @param {number} bits a half-precision pattern */
function decodeHalf(bits) {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >>> 10) & 0x1f;
  const mantissa = bits & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 0x1f) return mantissa ? NaN : sign * Infinity;
  return sign * (1024 + mantissa) * 2 ** (exponent - 25);
}

/**
 * Decode exactly one CBOR item from `data`; trailing bytes are an error.
 * @param {Uint8Array} data
 * @returns {unknown}
 */
export function decode(data) {
  const decoder = new Decoder(data);
  const value = decoder.item(1);
  if (decoder.pos !== decoder.end) {
    throw new CborError(
      `${decoder.end - decoder.pos} bytes follow the item at offset ${decoder.pos}`,
      decoder.pos,
    );
  }
  return value;
}
