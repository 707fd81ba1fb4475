// The package as a user gets it: `npm pack` into one temporary directory, an
// empty project in another, `npm install` of the tarball there (cborg comes
// from the registry), then the installed package imported with node and used
// for real (a request encoded and decoded, a round trip against a real
// `brain serve`), and `tsc --noEmit` on a TypeScript file that uses the
// installed types, so a tarball that misses a file or ships broken types fails.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { killServerOnExit, readCredentials, startServer, stopServer } from './server.js';

const run = promisify(execFile);
const PACKAGE = fileURLToPath(new URL('../', import.meta.url));
const TSC = join(PACKAGE, 'node_modules', 'typescript', 'bin', 'tsc');
/** npm prints its own notices on stderr; keep them out of the way. */
const NPM_ENV = { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' };

/** @type {string} */ let packDir;
/** @type {string} */ let project;
/** @type {string[]} */ let packed;

before(async () => {
  packDir = mkdtempSync(join(tmpdir(), 'brain-js-pack-'));
  project = mkdtempSync(join(tmpdir(), 'brain-js-project-'));
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', packDir], { cwd: PACKAGE, env: NPM_ENV });
  const [info] = JSON.parse(stdout);
  packed = info.files.map((/** @type {{path: string}} */ f) => f.path);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'brain-js-user', version: '1.0.0', private: true, type: 'module' }));
  await run('npm', ['install', '--no-package-lock', join(packDir, info.filename)], { cwd: project, env: NPM_ENV });
});

after(() => {
  for (const dir of [packDir, project]) if (dir) rmSync(dir, { recursive: true, force: true });
});

test('the tarball holds the client and its types, and no tests or tools', () => {
  for (const path of ['package.json', 'README.md', 'index.js', 'index.d.ts', 'messages.d.ts', 'src/contract.js', 'src/wire.js']) {
    assert.ok(packed.includes(path), `${path} is in the tarball`);
  }
  assert.deepEqual(packed.filter((p) => /^(test|scripts)\/|conformance|tsconfig|node_modules/.test(p)), []);
  assert.deepEqual(readdirSync(join(project, 'node_modules')).filter((name) => !name.startsWith('.')).sort(), ['brain-wire-client', 'cborg']);
});

const USE = `
import assert from 'node:assert/strict';
import {
  Client, EncodeError, NotFound, OPCODE_BY_NAME, RESPONSE_BIT, decodeMessage, encodePayload, encodeFrame, FrameReader,
  dateFromNanos,
} from 'brain-wire-client';

// A request with a Date for a time, encoded to a frame and read back.
const op = OPCODE_BY_NAME.get('STATEMENT_LIST');
const when = new Date('2024-02-29T12:34:56.789Z');
const frame = encodeFrame(op.code, 1, encodePayload(op.code, { as_of: when, limit: 5 }), { eos: true });
const [read] = new FrameReader().feed(frame);
assert.deepEqual(decodeMessage(read.opcode, read.payload), { as_of: BigInt(when.getTime()) * 1_000_000n, limit: 5 });
assert.throws(() => encodePayload(op.code, { as_of: new Date('not a date') }), (e) => e instanceof TypeError && e instanceof EncodeError && e.field === 'as_of');
assert.equal(RESPONSE_BIT, 0x80);

const port = Number(process.env.BRAIN_WIRE_PORT);
const client = await Client.connect({ host: process.env.BRAIN_HOST, port, apiKey: process.env.BRAIN_API_KEY });
try {
  const validFrom = new Date('2020-01-01T00:00:00.000Z');
  const created = await client.statementCreate({
    kind: 'fact', subject: { name: 'Alice' }, predicate: 'lives_in', object: { text: 'Lisbon' }, valid_from: validFrom,
  });
  const { statement } = await client.statementGet({ id: created.statement_id });
  const listed = await client.statementList({ predicate: 'lives_in', as_of: new Date(), valid_at: new Date('2021-06-01T00:00:00Z') });
  assert.ok(listed.statements.some((s) => s.id.equals(created.statement_id)));
  assert.equal(statement.valid_from, BigInt(validFrom.getTime()) * 1_000_000n);
  assert.equal(dateFromNanos(statement.valid_from).toISOString(), validFrom.toISOString());
  await assert.rejects(client.statementGet({ id: Buffer.alloc(16) }), NotFound);
  console.log(JSON.stringify({ ok: true, version: client.welcome.version }));
} finally {
  await client.bye();
}
`;

test('the installed package encodes, decodes and talks to a real server', { timeout: 90_000 }, async () => {
  const server = await startServer();
  killServerOnExit(server);
  try {
    const credentials = readCredentials(server);
    writeFileSync(join(project, 'use.mjs'), USE);
    const { stdout } = await run(process.execPath, ['use.mjs'], {
      cwd: project,
      env: { ...process.env, BRAIN_HOST: server.host, BRAIN_WIRE_PORT: String(server.wire), BRAIN_API_KEY: credentials.api_key },
    });
    assert.deepEqual(JSON.parse(stdout.trim()), { ok: true, version: 1 });
  } finally {
    await stopServer(server);
  }
});

const CHECK = `
import {
  Client, BrainError, EncodeError, NotFound, nanosFromDate, dateFromNanos,
  type ConnectedClient, type Statement, type StatementCreateInput, type RecallOk, type Nanos,
} from 'brain-wire-client';

export async function use(client: ConnectedClient): Promise<Nanos | undefined> {
  const draft: StatementCreateInput = {
    kind: 'fact', subject: { name: 'Alice' }, predicate: 'lives_in', object: { time: new Date() },
    valid_from: new Date(0), valid_to: 1_700_000_000_000_000_000n, event_at: null, request_id: new Uint8Array(16),
  };
  const created = await client.statementCreate(draft);
  const id: Buffer = created.statement_id;
  const got = await client.statementGet({ id });
  const statement: Statement = got.statement;
  const recalled: RecallOk = await client.recall({ cue: 'where does Alice live', valid_at: new Date(), top_k: 5 });
  const first: number | bigint | undefined = recalled.hits[0]?.statement?.recorded_at;
  const viaCall = await client.call('STATEMENT_GET', { id });
  const again: Statement = viaCall.statement;
  for await (const change of await client.subscribe({ from_lsn: 0 })) {
    const lsn: number | bigint = change.lsn;
    void lsn;
    break;
  }
  const ns: bigint = nanosFromDate(new Date());
  const date: Date = dateFromNanos(ns);
  void date; void first; void again;
  try {
    await client.ping({ nonce: 'n' });
  } catch (error) {
    if (error instanceof NotFound || error instanceof EncodeError) console.log(error.message);
    if (error instanceof BrainError) console.log(error.code, error.wireName, error.retryable, error.field);
  }
  // @ts-expect-error a time is a number, BigInt or Date, never a string
  await client.statementList({ as_of: '2024-01-01' });
  // @ts-expect-error kind is one of fact, preference, event
  await client.statementCreate({ ...draft, kind: 'rumour' });
  // @ts-expect-error an answer's bytes are a Buffer, not a string
  const wrong: string = created.statement_id;
  void wrong;
  // @ts-expect-error no such method
  client.statementFrobnicate();
  return statement.valid_from;
}

export const connect = (): Promise<ConnectedClient> => Client.connect({ apiKey: 'brn_x', port: 9090 });
`;

test('tsc --noEmit accepts a TypeScript use of the installed types, Dates included', { timeout: 90_000 }, async () => {
  writeFileSync(join(project, 'check.ts'), CHECK);
  writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({
    compilerOptions: {
      target: 'es2022', module: 'nodenext', moduleResolution: 'nodenext', strict: true, noEmit: true,
      skipLibCheck: false, types: ['node'], typeRoots: [join(PACKAGE, 'node_modules', '@types')],
    },
    files: ['check.ts'],
  }));
  const result = await run(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: project }).catch((error) => error);
  assert.equal(result.code ?? 0, 0, `tsc failed:\n${result.stdout}${result.stderr}`);
});
