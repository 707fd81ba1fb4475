// The language-neutral conformance runner (protocol/conformance/run.py) drives
// this client's adapter through every case and must find no mismatch.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { REPO } from './helpers.js';

/** The runner needs only the standard library: any Python 3.11 will do. */
const RUNNER_PYTHON = process.env.BRAIN_PYTHON ?? 'python3';
/** The runner takes about a second; this only bounds a hang. */
const RUNNER_TIMEOUT_MS = 120_000;

test('the conformance runner finds no mismatch in this client', () => {
  const adapter = fileURLToPath(new URL('../conformance-adapter.js', import.meta.url));
  const result = spawnSync(
    RUNNER_PYTHON,
    [`${REPO}protocol/conformance/run.py`, '--', process.execPath, adapter],
    { encoding: 'utf8', timeout: RUNNER_TIMEOUT_MS },
  );
  assert.equal(result.error, undefined, `cannot run ${RUNNER_PYTHON}: ${result.error}`);
  const output = `${result.stdout}${result.stderr}`;
  assert.equal(result.status, 0, output);
  const summary = output.match(/(\d+) checks, (\d+) mismatching/);
  assert.ok(summary, output);
  assert.ok(Number(summary[1]) > 1000, `only ${summary[1]} checks ran`);
  assert.equal(summary[2], '0', output);
});
