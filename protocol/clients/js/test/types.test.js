// index.d.ts and messages.d.ts: they compile under `strict`, index.d.ts names
// exactly the values index.js exports, and OpcodeMethods lists exactly the
// methods the client has. A type-level use of them, through an installed
// tarball, is in test/package.test.js.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import * as api from '../index.js';
import { Client } from '../src/client.js';

const PACKAGE = fileURLToPath(new URL('../', import.meta.url));

/** The program of this package's tsconfig.json (the two declaration files). */
function program() {
  const config = ts.getParsedCommandLineOfConfigFile(`${PACKAGE}tsconfig.json`, {}, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => { throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n')); },
  });
  if (!config) throw new Error('no tsconfig.json');
  return ts.createProgram(config.fileNames, config.options);
}

/** @param {readonly ts.Diagnostic[]} diagnostics */
const format = (diagnostics) => ts.formatDiagnostics(diagnostics, {
  getCanonicalFileName: (f) => f, getCurrentDirectory: () => PACKAGE, getNewLine: () => '\n',
});

test('the declaration files compile under strict', () => {
  const diagnostics = ts.getPreEmitDiagnostics(program());
  assert.equal(diagnostics.length, 0, format(diagnostics));
});

test('index.d.ts declares a value for exactly each export of index.js', () => {
  const prog = program();
  const checker = prog.getTypeChecker();
  const file = /** @type {ts.SourceFile} */ (prog.getSourceFile(`${PACKAGE}index.d.ts`));
  const module = /** @type {ts.Symbol} */ (checker.getSymbolAtLocation(file));
  const declared = checker.getExportsOfModule(module)
    .map((symbol) => (symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol))
    .filter((symbol) => symbol.flags & ts.SymbolFlags.Value)
    .map((symbol) => symbol.name);
  assert.deepEqual(declared.sort(), Object.keys(api).sort());
});

test('OpcodeMethods in messages.d.ts lists exactly the generated methods of Client', () => {
  const prog = program();
  const checker = prog.getTypeChecker();
  const file = /** @type {ts.SourceFile} */ (prog.getSourceFile(`${PACKAGE}messages.d.ts`));
  const module = /** @type {ts.Symbol} */ (checker.getSymbolAtLocation(file));
  const methods = /** @type {ts.Symbol} */ (checker.getExportsOfModule(module).find((s) => s.name === 'OpcodeMethods'));
  const declared = checker.getDeclaredTypeOfSymbol(methods).getProperties().map((p) => p.name);
  const handwritten = new Set(['constructor', 'call', 'stream', 'bye', 'close', 'closed', 'maxFrame', 'maxStreams', 'inFlight']);
  const actual = Object.getOwnPropertyNames(Client.prototype).filter((name) => !handwritten.has(name));
  assert.deepEqual(declared.sort(), actual.sort());
});
