// Shared by the tests: where the repository is, the golden vectors, and a
// scripted in-process server for client tests that need no real one.

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import net from 'node:net';
import { FrameReader, encodeFrame } from '../src/frame.js';
import { OPCODE_BY_NAME, RESPONSE_BIT, ERROR_OPCODE, decodeMessage, encodePayload } from '../src/wire.js';

/** The repository root: protocol/clients/js/test → four levels up. */
export const REPO = fileURLToPath(new URL('../../../../', import.meta.url));

/** The golden vectors of protocol/vectors/golden.json. */
export const VECTORS = JSON.parse(readFileSync(new URL('../../../vectors/golden.json', import.meta.url), 'utf8')).vectors;

/** The Python that runs the server: $BRAIN_PYTHON, else the repository's virtual environment. */
export const PYTHON = process.env.BRAIN_PYTHON ?? `${REPO}.venv/bin/python`;

/** @param {string} name */
export const code = (name) => /** @type {import('../src/wire.js').OpcodeInfo} */ (OPCODE_BY_NAME.get(name)).code;

/**
 * A scripted server on a free port. `onRequest(request, reply)` sees each
 * request after the handshake; `reply(payload, {opcode?, eos?, stream?})` answers it.
 * @param {object} options
 * @param {(request: {opcode: number, name: string, streamId: number, message: any}, reply: Function, socket: net.Socket) => void} options.onRequest
 * @param {Record<string, unknown>} [options.welcome] keys to override in WELCOME
 * @param {boolean} [options.refuseVersion] answer HELLO with VERSION_NOT_SUPPORTED
 */
export async function fakeServer({ onRequest, welcome = {}, refuseVersion = false }) {
  /** @type {net.Socket[]} */
  const sockets = [];
  /** @type {number[]} stream ids of requests, in arrival order */
  const streams = [];
  const server = net.createServer((socket) => {
    sockets.push(socket);
    const reader = new FrameReader();
    /** @param {number} opcode @param {number} sid @param {Record<string, unknown>} payload @param {boolean} eos */
    const send = (opcode, sid, payload, eos) => {
      if (!socket.destroyed) socket.write(encodeFrame(opcode, sid, encodePayload(opcode, payload, eos), { eos }));
    };
    socket.setNoDelay(true); // else Nagle holds back small answers by tens of ms
    socket.on('error', () => {});
    socket.on('data', (data) => {
      for (const frame of reader.feed(data)) {
        const name = [...OPCODE_BY_NAME.values()].find((op) => op.code === frame.opcode)?.name ?? '?';
        const message = decodeMessage(frame.opcode, frame.payload, false);
        if (name === 'HELLO') {
          if (refuseVersion) {
            send(ERROR_OPCODE, 0, { code: 0x20, name: 'VERSION_NOT_SUPPORTED', message: 'no', retryable: false }, true);
            socket.end();
            continue;
          }
          send(frame.opcode | RESPONSE_BIT, frame.streamId, {
            server: 'fake/1', version: 1, session_id: Buffer.alloc(16), max_frame: 16777215,
            max_streams: 256, server_time: 1n, ...welcome,
          }, true);
        } else if (name === 'AUTH') {
          send(frame.opcode | RESPONSE_BIT, frame.streamId, { namespace: 'default', key_id: Buffer.alloc(16), permissions: ['read'] }, true);
        } else {
          streams.push(frame.streamId);
          const reply = (/** @type {Record<string, unknown>} */ payload, { opcode = frame.opcode | RESPONSE_BIT, eos = true, stream = frame.streamId } = {}) =>
            send(opcode, stream, payload, eos);
          onRequest({ opcode: frame.opcode, name, streamId: frame.streamId, message }, reply, socket);
        }
      }
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const address = /** @type {net.AddressInfo} */ (server.address());
  return {
    port: address.port,
    streams,
    sockets,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(() => resolve(undefined)));
    },
  };
}
