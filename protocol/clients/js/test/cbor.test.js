// The CBOR layer's traps: float widths, integers past 2^53 and 2^64, map key
// order, text that JavaScript can hold but UTF-8 cannot, and strict decoding.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  CborError, Float, MAX_ARRAY_LENGTH, MAX_DEPTH, MAX_TEXT_BYTES, Simple, Tag, decode, encode,
} from '../src/cbor.js';

/** @param {unknown} value */
const hex = (value) => encode(value).toString('hex');
/** @param {string} text */
const dec = (text) => decode(Buffer.from(text, 'hex'));

test('floats take the shortest width that keeps the value', () => {
  assert.equal(hex(new Float(1)), 'f93c00');
  assert.equal(hex(1.5), 'f93e00');
  assert.equal(hex(new Float(65504)), 'f97bff');
  assert.equal(hex(new Float(65505)), 'fa477fe100');
  assert.equal(hex(5.960464477539063e-8), 'f90001');
  assert.equal(hex(2 ** -25), 'fa33000000');
  assert.equal(hex(Math.fround(1.1)), 'fa3f8ccccd');
  assert.equal(hex(1.1), 'fb3ff199999999999a');
  assert.equal(hex(1e300), 'fb7e37e43c8800759c');
  assert.equal(hex(NaN), 'f97e00');
  assert.equal(hex(Infinity), 'f97c00');
  assert.equal(hex(-Infinity), 'f9fc00');
  assert.equal(hex(new Float(-0)), 'f98000');
  assert.equal(hex(new Float(0)), 'f90000');
});

test('every half-precision pattern survives decode and encode', () => {
  for (let bits = 0; bits < 0x10000; bits++) {
    const exponent = (bits >>> 10) & 0x1f;
    if (exponent === 0x1f && (bits & 0x3ff)) continue; // NaN payloads are all written as f97e00
    const item = Buffer.from([0xf9, bits >>> 8, bits & 0xff]);
    assert.equal(encode(decode(item)).toString('hex'), item.toString('hex'), `half ${bits.toString(16)}`);
  }
});

test('an untyped number is an integer when integral and within ±2^53, else a float', () => {
  assert.equal(hex(1), '01');
  assert.equal(hex(-0), '00');
  assert.equal(hex(2 ** 53), '1b0020000000000000');
  assert.equal(hex(2 ** 53 * 2), 'fa5a800000'); // past 2^53 an integral number is taken for a float
});

test('integers: heads at every boundary, BigInt past 2^53, bignums past 2^64', () => {
  const cases = [
    [23, '17'], [24, '1818'], [255, '18ff'], [256, '190100'], [65535, '19ffff'], [65536, '1a00010000'],
    [2 ** 32 - 1, '1affffffff'], [2 ** 32, '1b0000000100000000'], [-1, '20'], [-24, '37'], [-25, '3818'],
    [2n ** 64n - 1n, '1bffffffffffffffff'], [2n ** 64n, 'c249010000000000000000'],
    [-(2n ** 64n), '3bffffffffffffffff'], [-(2n ** 64n) - 1n, 'c349010000000000000000'],
  ];
  for (const [value, want] of /** @type {[number|bigint, string][]} */ (cases)) {
    assert.equal(hex(value), want, String(value));
    assert.equal(dec(want), value, want);
  }
  assert.equal(dec('1b001fffffffffffff'), Number.MAX_SAFE_INTEGER);
  assert.equal(dec('1b0020000000000000'), 2n ** 53n); // not a safe integer: BigInt
  assert.equal(dec('3b001ffffffffffffe'), Number.MIN_SAFE_INTEGER);
  assert.equal(typeof dec('1b17d4b84d484d0000'), 'bigint'); // a nanosecond time
});

test('integral floats decode as Float, so they encode back as floats', () => {
  const value = dec('f93c00');
  assert.ok(value instanceof Float);
  assert.equal(/** @type {Float} */ (value).value, 1);
  assert.ok(Object.is(/** @type {Float} */ (dec('f98000')).value, -0));
  assert.equal(dec('f93e00'), 1.5);
  assert.equal(hex(dec('f93c00')), 'f93c00');
});

test('map keys are sorted bytewise by their encoding, not by insertion', () => {
  assert.equal(hex({ b: 1, aa: 3, a: 2 }), 'a3616102616201626161' + '03');
  // RFC 8949 §4.2.1 (bytewise), not RFC 7049 length-first: 1000 (1903e8) before "a" (6161).
  assert.equal(hex(new Map(/** @type {[unknown, number][]} */ ([['a', 1], [1000, 2]]))), 'a21903e802616101');
  assert.equal(hex({ skipped: undefined, kept: null }), 'a1646b657074f6');
});

test('text: UTF-8 both ways, a leading BOM kept, a lone surrogate refused', () => {
  assert.equal(hex('\u{10151}'), '64f0908591');
  assert.equal(dec('66efbbbf424f4d'), '\ufeffBOM');
  assert.throws(() => encode('\ud800'), /lone surrogate/);
  assert.throws(() => dec('62c328'), CborError);
  assert.throws(() => dec('63eda080'), CborError); // an encoded surrogate is not UTF-8
});

test('a "__proto__" key is a key, not a prototype', () => {
  const value = /** @type {any} */ (dec('a1695f5f70726f746f5f5f01'));
  assert.equal(Object.getPrototypeOf(value), Object.prototype);
  assert.deepEqual(Object.keys(value), ['__proto__']);
  assert.equal(hex(value), 'a1695f5f70726f746f5f5f01');
});

test('maps with non-text keys decode to Map; 1, 1.0 and true are distinct keys', () => {
  const value = dec('a301f5f93c00f4f5f6');
  assert.ok(value instanceof Map);
  assert.equal(/** @type {Map<unknown, unknown>} */ (value).size, 3);
});

test('bytes are Buffers; tags and simple values survive', () => {
  assert.deepEqual(dec('4401020304'), Buffer.from([1, 2, 3, 4]));
  assert.equal(hex(new Uint8Array([1, 2])), '420102');
  const tagged = dec('c074323031332d30332d32315432303a30343a30305a');
  assert.ok(tagged instanceof Tag);
  assert.equal(hex(tagged), 'c074323031332d30332d32315432303a30343a30305a');
  assert.deepEqual(dec('f820'), new Simple(32));
  assert.equal(dec('f7'), undefined);
});

test('strict decoding refuses what the server refuses', () => {
  const bad = {
    'trailing bytes': '0100',
    truncated: 'a1616101'.slice(0, 6),
    'duplicate text key': 'a2616101616102',
    'duplicate int key': 'a201010102',
    'reserved additional information': '1c',
    'indefinite integer': '1f',
    'indefinite tag': 'df',
    'break outside an indefinite item': 'ff',
    'two-byte simple value below 32': 'f810',
    'array past the end': '9a7fffffff',
    'map past the end': 'ba7fffffff',
    'text past the end': '7a7fffffff',
    'bytes past the end (8-byte length)': '5bffffffffffffffff',
    'map key that is an array': 'a18001',
    'bad chunk in an indefinite string': '7f4161ff',
    'indefinite string without break': '7f6161',
  };
  for (const [name, text] of Object.entries(bad)) assert.throws(() => dec(text), CborError, name);
});

test('limits: depth, array length and text size', () => {
  assert.equal(/** @type {unknown[]} */ (dec('81'.repeat(MAX_DEPTH - 1) + '80')).length, 1);
  assert.throws(() => dec('81'.repeat(MAX_DEPTH) + '80'), /nesting deeper/);
  const tooMany = Buffer.concat([Buffer.from('9a', 'hex'), u32(MAX_ARRAY_LENGTH + 1), Buffer.alloc(MAX_ARRAY_LENGTH + 1)]);
  assert.throws(() => decode(tooMany), /over 100000 items/);
  const tooLong = Buffer.concat([Buffer.from('7a', 'hex'), u32(MAX_TEXT_BYTES + 1), Buffer.alloc(MAX_TEXT_BYTES + 1, 0x61)]);
  assert.throws(() => decode(tooLong), /over 1048576 bytes/);
  assert.equal(/** @type {string} */ (decode(Buffer.concat([Buffer.from('7a', 'hex'), u32(MAX_TEXT_BYTES), Buffer.alloc(MAX_TEXT_BYTES, 0x61)]))).length, MAX_TEXT_BYTES);
});

/** @param {number} n */
function u32(n) {
  const out = Buffer.alloc(4);
  out.writeUInt32BE(n);
  return out;
}

test('values that have no CBOR form are refused', () => {
  assert.throws(() => encode(new Date()), /cannot encode Date/);
  assert.throws(() => encode(() => 1), TypeError);
  assert.throws(() => encode(Symbol('s')), TypeError);
});

test('what the server accepts is read: indefinite items, longer heads, tags kept', () => {
  assert.equal(dec('7f6161626263ff'), 'abc');
  assert.deepEqual(dec('5f4101420203ff'), Buffer.from([1, 2, 3]));
  assert.deepEqual(dec('9f0102ff'), [1, 2]);
  assert.deepEqual(dec('bf616101ff'), { a: 1 });
  assert.equal(dec('1b0000000000000001'), 1); // a head longer than needed, as the server accepts
  assert.deepEqual(dec('a1781a' + Buffer.from('abcdefghijklmnopqrstuvwxyz').toString('hex') + '60'), { abcdefghijklmnopqrstuvwxyz: '' });
  const bigTag = dec('db000000010000000001');
  assert.ok(bigTag instanceof Tag);
  assert.equal(bigTag.tag, 2 ** 32);
});

test('breaks and keys the server refuses are refused inside indefinite items too', () => {
  const bad = {
    'break where a map value belongs': 'bf6161ff',
    'break closing a definite array': '8201ff',
    'array as a key of an indefinite map': 'bf8001ff',
    'tag holding an array as a map key': 'a1c18001',
    'duplicate byte-string keys': 'a2410101410102',
    'duplicate float keys': 'a2f93c0001f93c0002',
    'indefinite map past its pair limit is still bounded by the input': 'bf',
    'invalid UTF-8 in a chunk of an indefinite text': '7f62c328ff',
    'simple value holding the two-byte form of false': 'f814',
  };
  for (const [name, text] of Object.entries(bad)) assert.throws(() => dec(text), CborError, name);
  const deep = '9f'.repeat(MAX_DEPTH) + '80' + 'ff'.repeat(MAX_DEPTH);
  assert.throws(() => dec(deep), /nesting deeper/);
});
