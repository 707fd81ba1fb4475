// The generated files, src/contract.js and messages.d.ts, are exactly what
// scripts/generate.js writes now from protocol/protocol.json and
// protocol/schema.json: the package's copy of the contract cannot drift.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { OUTPUTS, PACKAGE_DIR, PROTOCOL_DIR, generate } from '../scripts/generate.js';
import { PROTOCOL, SCHEMA } from '../src/contract.js';

for (const [path, text] of generate()) {
  test(`${path} is what scripts/generate.js writes from protocol/ (else: npm run generate)`, () => {
    const committed = readFileSync(new URL(path, PACKAGE_DIR), 'utf8');
    assert.ok(committed === text, `${path} differs from protocol/: run npm run generate`);
  });
}

test('the generated contract holds the source tables value for value', () => {
  assert.deepEqual(PROTOCOL, JSON.parse(readFileSync(new URL('protocol.json', PROTOCOL_DIR), 'utf8')));
  assert.deepEqual(SCHEMA, JSON.parse(readFileSync(new URL('schema.json', PROTOCOL_DIR), 'utf8')));
});

test('every generated file ships in the package', () => {
  const pkg = JSON.parse(readFileSync(new URL('package.json', PACKAGE_DIR), 'utf8'));
  for (const path of OUTPUTS) {
    assert.ok(pkg.files.some((/** @type {string} */ f) => f === path || (f.endsWith('/*.js') && path.startsWith(f.slice(0, -4)) && path.endsWith('.js'))), path);
  }
});
