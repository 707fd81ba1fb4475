// A real `brain serve`, started on free ports in a temporary directory with
// the hashing embedder (no model needed), for the tests that need one.

import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { PYTHON, REPO } from './helpers.js';

/** The line `brain serve` prints once every port is bound (brain/server/spawn.py READY_LINE). */
const READY_LINE = /serving wire on (?<host>[^ ]+):(?<wire>\d+), public HTTP on [^ ]+:(?<public>\d+), admin HTTP on [^ ]+:(?<admin>\d+)/;
/** Start-up takes a few seconds; this bounds a server that never gets ready. */
const READY_TIMEOUT_MS = 60_000;
/** How long the server gets to exit after SIGTERM before it is killed. */
const STOP_TIMEOUT_MS = 20_000;

/** @typedef {{process: import('node:child_process').ChildProcess, host: string, wire: number, admin: number, dir: string, output: string[]}} Server */

/** Start `brain serve` and wait for its ready line. */
export async function startServer() {
  const dir = mkdtempSync(join(tmpdir(), 'brain-js-'));
  const child = spawn(
    PYTHON,
    ['-m', 'brain', 'serve', '--data', join(dir, 'data'), '--port', '0', '--public-port', '0', '--admin-port', '0'],
    { cwd: REPO, env: { ...process.env, BRAIN_RETRIEVAL__EMBEDDER: 'hashing' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  /** @type {string[]} */
  const output = [];
  // Keep draining both pipes so the server never blocks on a full one.
  createInterface({ input: /** @type {import('node:stream').Readable} */ (child.stderr) }).on('line', (line) => output.push(line));
  const lines = createInterface({ input: /** @type {import('node:stream').Readable} */ (child.stdout) });
  const ready = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ready line in ${READY_TIMEOUT_MS} ms:\n${output.join('\n')}`)), READY_TIMEOUT_MS);
    lines.on('line', (line) => {
      output.push(line);
      const match = READY_LINE.exec(line);
      if (match) {
        clearTimeout(timer);
        resolve(match.groups);
      }
    });
    child.once('exit', (status) => {
      clearTimeout(timer);
      reject(new Error(`brain serve exited (${status}) before it was ready:\n${output.join('\n')}`));
    });
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(new Error(`cannot start ${PYTHON}: ${error.message}`));
    });
  }).catch((error) => {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw error;
  });
  const { host, wire, admin } = /** @type {Record<string, string>} */ (ready);
  return { process: child, host, wire: Number(wire), admin: Number(admin), dir, output };
}

/**
 * If this process is ended before `after` runs (the runner's file timeout sends
 * SIGTERM), take the server down with it rather than leave it running.
 * @param {Server} server
 */
export function killServerOnExit(server) {
  const kill = () => {
    if (server.process.exitCode === null && server.process.signalCode === null) server.process.kill('SIGKILL');
  };
  process.once('exit', kill);
  for (const signal of /** @type {const} */ (['SIGTERM', 'SIGINT', 'SIGHUP'])) {
    process.once(signal, () => {
      kill();
      process.exit(1);
    });
  }
}

/** SIGTERM, then SIGKILL if it lingers; remove the directory. @param {Server | undefined} server */
export async function stopServer(server) {
  if (!server) return;
  const child = server.process;
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
    await exited;
    clearTimeout(timer);
  }
  rmSync(server.dir, { recursive: true, force: true });
}

/**
 * The keys of credentials.toml (flat `key = "value"` lines, as the server writes them).
 * @param {Server} server @returns {Record<string, string>}
 */
export function readCredentials(server) {
  const text = readFileSync(join(server.dir, 'data', 'credentials.toml'), 'utf8');
  return Object.fromEntries([...text.matchAll(/^(\w+)\s*=\s*"([^"]*)"\s*$/gm)].map((m) => [m[1], m[2]]));
}

