// The typed errors agree with protocol/protocol.json and with brain/errors.py's tree.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PROTOCOL } from '../src/wire.js';
import * as errors from '../src/errors.js';

test('one class per wire error, with its code, name and retryability', () => {
  const registered = errors.registeredErrors();
  assert.equal(registered.size, PROTOCOL.errors.length);
  for (const row of PROTOCOL.errors) {
    const cls = registered.get(Number.parseInt(row.code, 16));
    assert.ok(cls, `no class for ${row.name}`);
    assert.equal(cls.wireName, row.name);
    const error = new cls('x');
    assert.equal(error.code, Number.parseInt(row.code, 16));
    assert.equal(error.retryable, row.retryable, row.name);
    assert.equal(error instanceof errors.ConnectionFault, row.closes_connection, row.name);
    assert.ok(error instanceof errors.BrainError && error instanceof Error);
    // Exported under its class name: BAD_FRAME → BadFrame.
    const className = row.name.toLowerCase().replace(/(^|_)([a-z])/g, (/** @type {string} */ _, /** @type {string} */ __, /** @type {string} */ c) => c.toUpperCase());
    assert.equal(/** @type {any} */ (errors)[className], cls, className);
    assert.equal(error.name, className);
  }
});

test('the grouping of brain/errors.py', () => {
  assert.ok(new errors.NotFound('x') instanceof errors.StateError);
  assert.ok(new errors.Forgotten('x') instanceof errors.StateError);
  assert.ok(new errors.InvalidArgument('x') instanceof errors.RequestError);
  assert.ok(new errors.PermissionDenied('x') instanceof errors.AccessError);
  assert.ok(new errors.Overloaded('x') instanceof errors.TransientError);
  assert.ok(new errors.RequestTimeout('x').retryable);
  assert.ok(new errors.ConnectionClosed('x') instanceof errors.ConnectionFault);
});

test('an ERROR payload becomes its typed error, with field and retry_after_ms', () => {
  const error = errors.errorFromWire({ code: 0x40, name: 'INVALID_ARGUMENT', message: 'bad', retryable: false, field: 'filters.as_of' });
  assert.ok(error instanceof errors.InvalidArgument);
  assert.equal(error.field, 'filters.as_of');
  const busy = errors.errorFromWire({ code: 0x72, name: 'OVERLOADED', message: 'busy', retryable: true, retry_after_ms: 250 });
  assert.ok(busy instanceof errors.Overloaded);
  assert.equal(busy.retryAfterMs, 250);
});

test('an unknown code keeps what the server said, including retryable', () => {
  const error = errors.errorFromWire({ code: 0x0999, name: 'NEW_THING', message: 'm', retryable: true });
  assert.ok(error instanceof errors.UnknownError);
  assert.equal(error.code, 0x0999);
  assert.equal(error.wireName, 'NEW_THING');
  assert.equal(error.retryable, true);
});

test('registering a taken code is refused', () => {
  class Again extends errors.BrainError {
    static code = 0x0050;
    static wireName = 'NOT_FOUND_AGAIN';
  }
  assert.throws(() => errors.BrainError.register(Again), /registered twice/);
});
