import { test } from 'node:test';
import assert from 'node:assert/strict';
import { crc32c } from '../src/crc32c.js';

test('CRC32C check value of "123456789" is e3069283 (not zlib CRC32 cbf43926)', () => {
  assert.equal(crc32c(Buffer.from('123456789')), 0xe3069283);
});

test('CRC32C of nothing is 0, and it continues across pieces', () => {
  assert.equal(crc32c(Buffer.alloc(0)), 0);
  const whole = crc32c(Buffer.from('hello, world'));
  assert.equal(crc32c(Buffer.from(', world'), crc32c(Buffer.from('hello'))), whole);
});

test('the payload CRC of spec/01-wire.md §1 PING example', () => {
  assert.equal(crc32c(Buffer.from('a1656e6f6e636507', 'hex')), 0x3e8e706f);
});
