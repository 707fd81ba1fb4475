// A pipelined connection to a Brain server over TCP (spec/01-wire.md §3,
// spec/01-wire.md §8).
//
//   const client = await Client.connect({ host, port, apiKey });
//   const { memory_id } = await client.encode({ text: 'Alice moved to Lisbon' });
//   await client.bye();
//
// Every request opcode has a method named after it in camelCase
// (`statementCreate`, `recall`, `memoryGet`, ...), made at load time from the
// opcode table in src/contract.js (generated from protocol/): it takes the request as a plain object
// with the wire's snake_case keys and resolves to the decoded answer, or
// rejects with the typed error the server sent (errors.js). Writes get a fresh
// `request_id` when the caller gives none; pass your own to retry idempotently.
//
// Requests may be issued concurrently; each goes out at once on a fresh odd
// stream id, up to the server's `max_streams` (later ones wait for a slot
// here rather than earn STREAM_LIMIT), and answers are matched by stream id in
// whatever order they come.

import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { FrameReader, encodeFrame, MAX_STREAM_ID, PROTOCOL_VERSION, DEFAULT_MAX_FRAME } from './frame.js';
import {
  BadFrame, BrainError, ConnectionClosed, ConnectionFault, FrameTooLarge, RequestTimeout,
  VersionNotSupported, errorFromWire,
} from './errors.js';
import {
  ERROR_OPCODE, OPCODE_BY_NAME, OPCODES, PayloadError, RESPONSE_BIT, isStreaming,
  decodeMessage, encodePayload, shapeFields,
} from './wire.js';

/** The server's default wire port (spec/01-wire.md §1). */
export const DEFAULT_PORT = 9090;
/** How this client names itself in HELLO. */
export const DEFAULT_CLIENT_NAME = 'brain-js/0.1.0';
/** Default wait for one answer: long enough for a cold RECALL, short enough to notice a hang. */
export const DEFAULT_TIMEOUT_MS = 30_000;
/** Default wait for TCP connect plus handshake; the server allows 10 s for the handshake. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
/** In-flight limit before WELCOME says otherwise (spec/01-wire.md §3 default). */
const DEFAULT_MAX_STREAMS = 256;
/** How long bye() waits for the server to close after BYE_OK before closing itself. */
const BYE_CLOSE_WAIT_MS = 2_000;

/**
 * A fresh request id: a UUIDv7 (16 bytes, time-ordered like the server's record ids).
 * @returns {Buffer}
 */
export function newRequestId() {
  const id = randomBytes(16);
  id.writeUIntBE(Date.now(), 0, 6);
  id[6] = (id[6] & 0x0f) | 0x70; // version 7
  id[8] = (id[8] & 0x3f) | 0x80; // RFC 9562 variant
  return id;
}

/** @param {string} name HELLO_WORLD → helloWorld */
const camel = (name) => name.toLowerCase().replace(/_([a-z])/g, (_, c) => c.toUpperCase());

/**
 * @typedef {(payload?: Record<string, unknown>, options?: {timeoutMs?: number}) => Promise<Record<string, any>>} RequestMethod
 * @typedef {(payload?: Record<string, unknown>) => Promise<AnswerStream>} StreamMethod
 */

/**
 * The methods generated at the end of this module, one per request opcode
 * (request shape → answer shape, as named in protocol/schema.json). Listed
 * here for editors and type checkers; a test keeps the list complete. The
 * typed form, with every request and answer shape, is in messages.d.ts.
 * @typedef {object} OpcodeMethods
 * @property {RequestMethod} ping                PING: Ping → Pong
 * @property {RequestMethod} encode              ENCODE: Encode → EncodeOk
 * @property {RequestMethod} recall              RECALL: Recall → RecallOk
 * @property {RequestMethod} forget              FORGET: Forget → ForgetOk
 * @property {RequestMethod} memoryGet           MEMORY_GET: MemoryGet → MemoryGetOk
 * @property {StreamMethod} subscribe           SUBSCRIBE: Subscribe → ChangeEvent frames, then SubscriptionEnded
 * @property {RequestMethod} unsubscribe         UNSUBSCRIBE: Unsubscribe → CancelStreamOk
 * @property {RequestMethod} txnBegin            TXN_BEGIN: TxnBegin → TxnBegun
 * @property {RequestMethod} txnCommit           TXN_COMMIT: TxnCommit → TxnCommitted
 * @property {RequestMethod} txnAbort            TXN_ABORT: TxnAbort → TxnAborted
 * @property {RequestMethod} cancelStream        CANCEL_STREAM: CancelStream → CancelStreamOk
 * @property {RequestMethod} schemaPut           SCHEMA_PUT: SchemaPut → SchemaPutOk
 * @property {RequestMethod} schemaGet           SCHEMA_GET: SchemaGet → Schema
 * @property {RequestMethod} entityCreate        ENTITY_CREATE: EntityCreate → EntityCreateOk
 * @property {RequestMethod} entityGet           ENTITY_GET: EntityGet → EntityGetOk
 * @property {RequestMethod} entityUpdate        ENTITY_UPDATE: EntityUpdate → EntityUpdateOk
 * @property {RequestMethod} entityMerge         ENTITY_MERGE: EntityMerge → EntityMergeOk
 * @property {RequestMethod} entityUnmerge       ENTITY_UNMERGE: EntityUnmerge → EntityUnmergeOk
 * @property {RequestMethod} entityResolve       ENTITY_RESOLVE: EntityResolve → EntityResolveOk
 * @property {RequestMethod} entityList          ENTITY_LIST: EntityList → EntityListOk
 * @property {RequestMethod} entityTombstone     ENTITY_TOMBSTONE: EntityTombstone → EntityTombstoneOk
 * @property {RequestMethod} entityHistory       ENTITY_HISTORY: EntityHistory → EntityHistoryOk
 * @property {RequestMethod} statementCreate     STATEMENT_CREATE: StatementCreate → StatementCreateOk
 * @property {RequestMethod} statementGet        STATEMENT_GET: StatementGet → StatementGetOk
 * @property {RequestMethod} statementSupersede  STATEMENT_SUPERSEDE: StatementSupersede → StatementSupersedeOk
 * @property {RequestMethod} statementTombstone  STATEMENT_TOMBSTONE: StatementTombstone → StatementTombstoned
 * @property {RequestMethod} statementRetract    STATEMENT_RETRACT: StatementRetract → StatementRetracted
 * @property {RequestMethod} statementHistory    STATEMENT_HISTORY: StatementHistory → StatementHistoryOk
 * @property {RequestMethod} statementList       STATEMENT_LIST: StatementList → StatementListOk
 * @property {RequestMethod} relationCreate      RELATION_CREATE: RelationCreate → RelationCreateOk
 * @property {RequestMethod} relationGet         RELATION_GET: RelationGet → RelationGetOk
 * @property {RequestMethod} relationSupersede   RELATION_SUPERSEDE: RelationSupersede → RelationSupersedeOk
 * @property {RequestMethod} relationTombstone   RELATION_TOMBSTONE: RelationTombstone → RelationTombstoned
 * @property {RequestMethod} relationList        RELATION_LIST: RelationList → RelationListOk
 * @property {RequestMethod} relationTraverse    RELATION_TRAVERSE: RelationTraverse → RelationTraverseOk
 * @property {RequestMethod} explain             EXPLAIN: ExplainRequest → ExplainOk
 * @property {RequestMethod} reviewList          REVIEW_LIST: ReviewList → ReviewListOk
 * @property {RequestMethod} reviewDecide        REVIEW_DECIDE: ReviewDecide → ReviewDecided
 */

/**
 * @typedef {object} Pending
 * @property {import('./wire.js').OpcodeInfo} op
 * @property {(value: Record<string, unknown>) => void} resolve
 * @property {(error: Error) => void} reject
 * @property {boolean} abandoned  the caller stopped waiting; the id stays reserved until EOS
 * @property {NodeJS.Timeout | undefined} timer
 * @property {((frame: {value?: Record<string, unknown>, error?: Error, done?: boolean}) => void) | undefined} push
 *   set for streaming answers
 */

export class Client {
  /**
   * Open a connection and complete HELLO and AUTH.
   * @param {object} options
   * @param {string} options.apiKey
   * @param {string} [options.host]
   * @param {number} [options.port]
   * @param {string} [options.clientName]
   * @param {number} [options.timeoutMs] default wait for each answer
   * @param {number} [options.connectTimeoutMs]
   * @returns {Promise<Client & OpcodeMethods>}
   */
  static async connect({
    apiKey, host = '127.0.0.1', port = DEFAULT_PORT, clientName = DEFAULT_CLIENT_NAME,
    timeoutMs = DEFAULT_TIMEOUT_MS, connectTimeoutMs = DEFAULT_CONNECT_TIMEOUT_MS,
  }) {
    const socket = await new Promise((resolve, reject) => {
      const sock = net.createConnection({ host, port });
      const timer = setTimeout(() => {
        sock.destroy();
        reject(new ConnectionClosed(`cannot connect to ${host}:${port}: no answer in ${connectTimeoutMs} ms`));
      }, connectTimeoutMs);
      sock.once('connect', () => {
        clearTimeout(timer);
        resolve(sock);
      });
      sock.once('error', (error) => {
        clearTimeout(timer);
        reject(new ConnectionClosed(`cannot connect to ${host}:${port}: ${error.message}`, { cause: error }));
      });
    });
    socket.setNoDelay(true);
    const client = new Client(socket, { timeoutMs });
    try {
      await client.#handshake(clientName, apiKey, connectTimeoutMs);
    } catch (error) {
      client.close();
      throw error;
    }
    return /** @type {Client & OpcodeMethods} */ (client);
  }

  /** @type {import('node:net').Socket} */
  #socket;
  #reader = new FrameReader(); // the server may answer with frames up to the 24-bit ceiling
  /** @type {Map<number, Pending>} */
  #pending = new Map();
  #nextId = 1;
  /** @type {(() => void)[]} */
  #slotWaiters = [];
  /** @type {Error | null} */
  #fault = null;
  #byeSent = false;
  #timeoutMs;
  /** @type {Promise<void>} */
  #closedPromise;

  /** The server's WELCOME: name, session id, limits. @type {Record<string, any> | null} */
  welcome = null;
  /** The server's AUTH_OK: namespace, key id, permissions. @type {Record<string, any> | null} */
  authOk = null;
  /** The most requests that were ever in flight at once on this connection. */
  peakInFlight = 0;

  /**
   * Wrap a connected socket; use Client.connect() to also do the handshake.
   * @param {import('node:net').Socket} socket
   * @param {{timeoutMs?: number}} [options]
   */
  constructor(socket, { timeoutMs = DEFAULT_TIMEOUT_MS } = {}) {
    this.#socket = socket;
    this.#timeoutMs = timeoutMs;
    this.#closedPromise = new Promise((resolve) => socket.once('close', () => resolve()));
    socket.on('data', (data) => this.#receive(data));
    socket.on('error', (error) => this.#failAll(new ConnectionClosed(`the connection failed: ${error.message}`, { cause: error })));
    socket.on('close', () => this.#failAll(new ConnectionClosed('the server closed the connection')));
  }

  /** True once the connection is over. */
  get closed() {
    return this.#fault !== null;
  }

  /** Largest request payload the server accepts. */
  get maxFrame() {
    return this.welcome ? Number(this.welcome.max_frame) : DEFAULT_MAX_FRAME;
  }

  /** Requests the server lets be in flight at once. */
  get maxStreams() {
    return this.welcome ? Number(this.welcome.max_streams) : DEFAULT_MAX_STREAMS;
  }

  /** Requests whose answer has not ended, abandoned ones included. */
  get inFlight() {
    return this.#pending.size;
  }

  /**
   * Send request `name` and resolve to its answer, or reject with the server's typed error.
   * @param {string} name an opcode name from protocol.json, e.g. 'STATEMENT_GET'
   * @param {Record<string, unknown>} [payload]
   * @param {{timeoutMs?: number}} [options]
   * @returns {Promise<Record<string, any>>}
   */
  async call(name, payload = {}, { timeoutMs } = {}) {
    const op = this.#opcode(name);
    if (isStreaming(op)) throw new TypeError(`${name} answers with a stream; use stream()`);
    if (op.name === 'HELLO') throw new TypeError('HELLO belongs to the handshake that connect() does');
    // The check and the registration below must run without an await between them,
    // or several callers woken together would all take the one free slot.
    while (!this.#fault && this.#pending.size >= this.maxStreams) await this.#slotFreed();
    return new Promise((resolve, reject) => {
      const sid = this.#allocate();
      const pending = this.#register(sid, op, resolve, reject);
      this.#arm(sid, pending, timeoutMs);
      this.#send(op, sid, payload, pending);
    });
  }

  /**
   * Send a request whose answer is a stream (SUBSCRIBE) and return the stream
   * once the request is sent; iterate it for each answer frame.
   * @param {string} name
   * @param {Record<string, unknown>} [payload]
   * @returns {Promise<AnswerStream>}
   */
  async stream(name, payload = {}) {
    const op = this.#opcode(name);
    while (!this.#fault && this.#pending.size >= this.maxStreams) await this.#slotFreed();
    const sid = this.#allocate();
    const answer = new AnswerStream(this, sid, op);
    const pending = this.#register(sid, op, () => {}, (error) => answer._push({ error }));
    pending.push = (item) => answer._push(item);
    this.#send(op, sid, payload, pending);
    return answer;
  }

  /**
   * Ask the server to finish what is in flight, answer BYE_OK and close.
   * @returns {Promise<void>}
   */
  async bye() {
    if (this.closed) return;
    // Set first: requests issued from now on are refused here, as the server would.
    this.#byeSent = true;
    await this.call('BYE', {});
    // The server closes after BYE_OK; do not wait forever for it.
    const timer = setTimeout(() => this.close(), BYE_CLOSE_WAIT_MS);
    await this.#closedPromise;
    clearTimeout(timer);
  }

  /** Close the connection now; requests in flight fail with ConnectionClosed. */
  close() {
    this.#failAll(new ConnectionClosed('the client closed the connection'));
    this.#socket.destroy();
  }

  // --- internals -----------------------------------------------------------------

  /** @param {string} clientName @param {string} apiKey @param {number} timeoutMs */
  async #handshake(clientName, apiKey, timeoutMs) {
    const hello = this.#opcode('HELLO');
    this.welcome = await new Promise((resolve, reject) => {
      const pending = this.#register(0, hello, resolve, reject);
      this.#arm(0, pending, timeoutMs);
      this.#send(hello, 0, { client: clientName, versions: [PROTOCOL_VERSION] }, pending);
    });
    if (Number(this.welcome?.version) !== PROTOCOL_VERSION) {
      throw new VersionNotSupported(`the server chose protocol version ${this.welcome?.version}`);
    }
    const auth = this.#opcode('AUTH');
    // spec/01-wire.md §8: AUTH on stream 0, once WELCOME is in (stream 0 is then free again).
    this.authOk = await new Promise((resolve, reject) => {
      const pending = this.#register(0, auth, resolve, reject);
      this.#arm(0, pending, timeoutMs);
      this.#send(auth, 0, { api_key: apiKey }, pending);
    });
  }

  /** @param {string} name */
  #opcode(name) {
    const op = OPCODE_BY_NAME.get(name);
    if (!op) throw new TypeError(`unknown opcode ${name}`);
    return op;
  }

  /**
   * @param {number} sid @param {import('./wire.js').OpcodeInfo} op
   * @param {(value: any) => void} resolve @param {(error: Error) => void} reject
   * @returns {Pending}
   */
  #register(sid, op, resolve, reject) {
    /** @type {Pending} */
    const pending = { op, resolve, reject, abandoned: false, timer: undefined, push: undefined };
    this.#pending.set(sid, pending);
    this.peakInFlight = Math.max(this.peakInFlight, this.#pending.size);
    return pending;
  }

  /** @param {number} sid @param {Pending} pending @param {number} [timeoutMs] */
  #arm(sid, pending, timeoutMs) {
    const wait = timeoutMs ?? this.#timeoutMs;
    if (!Number.isFinite(wait)) return;
    pending.timer = setTimeout(() => {
      // The id stays reserved until the server ends the stream: it still counts it in flight.
      pending.abandoned = true;
      pending.reject(new RequestTimeout(`no answer to ${pending.op.name} on stream ${sid} within ${wait} ms`));
    }, wait);
  }

  /**
   * Frame and write one request; on a local failure, free its stream and reject.
   * @param {import('./wire.js').OpcodeInfo} op @param {number} sid
   * @param {Record<string, unknown>} payload @param {Pending} pending
   */
  #send(op, sid, payload, pending) {
    try {
      if (this.#fault) throw this.#closedBy(this.#fault);
      if (this.#byeSent && op.name !== 'BYE') throw new ConnectionClosed('BYE was sent; the connection takes no more requests');
      const bytes = encodePayload(op.code, payload);
      if (bytes.length > this.maxFrame) {
        // Refused here: the server would answer FRAME_TOO_LARGE and close the connection.
        throw new FrameTooLarge(`${op.name} payload of ${bytes.length} bytes is over max_frame ${this.maxFrame}`);
      }
      this.#socket.write(encodeFrame(op.code, sid, bytes));
    } catch (error) {
      this.#finish(sid, pending);
      pending.reject(/** @type {Error} */ (error));
    }
  }

  #allocate() {
    let sid = this.#nextId;
    while (this.#pending.has(sid)) sid = sid + 2 > MAX_STREAM_ID ? 1 : sid + 2;
    this.#nextId = sid + 2 > MAX_STREAM_ID ? 1 : sid + 2;
    return sid;
  }

  /** Resolves when some request ends (or the connection does). */
  #slotFreed() {
    return new Promise((resolve) => this.#slotWaiters.push(() => resolve(undefined)));
  }

  /** @param {number} sid @param {Pending} pending */
  #finish(sid, pending) {
    clearTimeout(pending.timer);
    if (this.#pending.get(sid) === pending) this.#pending.delete(sid);
    const waiters = this.#slotWaiters.splice(0);
    for (const wake of waiters) wake();
  }

  /** @param {Buffer} data */
  #receive(data) {
    if (this.#fault) return;
    try {
      for (const frame of this.#reader.feed(data)) this.#dispatch(frame);
    } catch (error) {
      // The server broke the protocol: the byte stream can no longer be trusted.
      const fault = error instanceof BrainError ? error : new BadFrame(String(error), { cause: error });
      this.#failAll(fault);
      this.#socket.destroy();
    }
  }

  /** @param {import('./frame.js').Frame} frame */
  #dispatch(frame) {
    const { opcode, streamId: sid, eos } = frame;
    if (!(opcode & RESPONSE_BIT)) throw new BadFrame(`the server sent request opcode 0x${opcode.toString(16)} on stream ${sid}`);
    const pending = this.#pending.get(sid);
    if (opcode === ERROR_OPCODE) {
      const error = errorFromWire(/** @type {any} */ (this.#decode(opcode, frame.payload, `ERROR on stream ${sid}`)));
      if (!pending) {
        if (sid !== 0) throw new BadFrame(`ERROR on stream ${sid}, which has no request in flight`);
        // A connection-level ERROR on stream 0 that answers nothing: the server closes next.
        this.#failAll(error);
        return;
      }
      this.#finish(sid, pending);
      if (pending.push) pending.push({ error });
      else if (!pending.abandoned) pending.reject(error);
      if (error instanceof ConnectionFault) this.#failAll(error);
      return;
    }
    if (!pending) throw new BadFrame(`answer 0x${opcode.toString(16)} on stream ${sid}, which has no request in flight`);
    if (opcode !== (pending.op.code | RESPONSE_BIT)) {
      throw new BadFrame(`answer 0x${opcode.toString(16)} on stream ${sid} does not match request ${pending.op.name}`);
    }
    const message = this.#decode(opcode, frame.payload, `${pending.op.name} answer`, eos);
    if (pending.push) {
      if (eos) this.#finish(sid, pending);
      pending.push({ value: message, done: eos });
      return;
    }
    // A single-answer request: the first frame is the answer; the id stays
    // reserved until the frame with EOS (the server's answers carry it at once).
    if (eos) this.#finish(sid, pending);
    else clearTimeout(pending.timer);
    if (!pending.abandoned) pending.resolve(message);
    pending.abandoned = true;
  }

  /** @param {number} opcode @param {Buffer} payload @param {string} what @param {boolean} [eos] */
  #decode(opcode, payload, what, eos = true) {
    try {
      return decodeMessage(opcode, payload, eos);
    } catch (error) {
      if (error instanceof PayloadError) {
        throw new BadFrame(`the server sent an invalid ${what}: ${error.message}`, { cause: error });
      }
      throw error;
    }
  }

  /** @param {Error} fault */
  #failAll(fault) {
    if (this.#fault === null) this.#fault = fault;
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const p of pending) {
      clearTimeout(p.timer);
      const error = this.#closedBy(fault);
      if (p.push) p.push({ error });
      else if (!p.abandoned) p.reject(error);
    }
    const waiters = this.#slotWaiters.splice(0);
    for (const wake of waiters) wake();
  }

  /** @param {Error} fault */
  #closedBy(fault) {
    if (fault instanceof ConnectionClosed) return new ConnectionClosed(fault.message, { cause: fault.cause });
    const name = fault instanceof BrainError ? fault.wireName : fault.name;
    return new ConnectionClosed(`the connection is closed: ${name}: ${fault.message}`, { cause: fault });
  }
}

/**
 * An answer that is a stream of frames (SUBSCRIBE). Iterate it for each
 * message; the loop ends at the frame flagged EOS. When the opcode has a
 * stream-end message (SUBSCRIBE's `{next_lsn}`), that last frame is not
 * yielded but resolves `end`. Leaving the loop early sends CANCEL_STREAM.
 */
export class AnswerStream {
  #client;
  #op;
  /** @type {{value?: Record<string, any>, error?: Error, done?: boolean}[]} */
  #queue = [];
  /** @type {(() => void) | null} */
  #wake = null;
  #finished = false;
  /** @type {(value: Record<string, any> | null) => void} */
  #settle = () => {};

  /**
   * @param {Client} client @param {number} streamId
   * @param {import('./wire.js').OpcodeInfo} op
   */
  constructor(client, streamId, op) {
    this.#client = client;
    this.#op = op;
    /** The stream id the answer travels on (what UNSUBSCRIBE and CANCEL_STREAM name). */
    this.streamId = streamId;
    /**
     * The stream-end message once the server ended the stream, or null when it
     * ended otherwise (an error, a closed connection). Never rejects.
     * @type {Promise<Record<string, any> | null>}
     */
    this.end = new Promise((resolve) => { this.#settle = resolve; });
  }

  /** @internal @param {{value?: Record<string, any>, error?: Error, done?: boolean}} item */
  _push(item) {
    if (item.error || item.done) this.#finished = true;
    if (item.error) this.#settle(null);
    else if (item.done) this.#settle(this.#op.streamEnd ? /** @type {Record<string, any>} */ (item.value) : null);
    this.#queue.push(item);
    this.#wake?.();
  }

  /** Ask the server to end the stream (CANCEL_STREAM); resolves to `{cancelled}`. */
  cancel() {
    return this.#client.call('CANCEL_STREAM', { stream: this.streamId });
  }

  /** @returns {AsyncGenerator<Record<string, any>, void, undefined>} */
  async *[Symbol.asyncIterator]() {
    let clean = false;
    try {
      for (;;) {
        if (this.#queue.length === 0) await new Promise((resolve) => { this.#wake = () => resolve(undefined); });
        this.#wake = null;
        const item = /** @type {{value?: Record<string, any>, error?: Error, done?: boolean}} */ (this.#queue.shift());
        if (item.error) {
          clean = true;
          throw item.error;
        }
        if (item.done) {
          clean = true;
          if (!this.#op.streamEnd && item.value) yield item.value;
          return;
        }
        if (item.value) yield item.value;
      }
    } finally {
      if (!clean && !this.#finished && !this.#client.closed) {
        // Best effort: the server ends the stream with its EOS frame, which settles `end`.
        this.cancel().catch(() => {});
      }
    }
  }
}

// One method per request opcode, from the opcode table. HELLO and AUTH belong
// to connect(), BYE to bye().
const HANDWRITTEN = new Set(['HELLO', 'AUTH', 'BYE']);

for (const op of OPCODES) {
  if (HANDWRITTEN.has(op.name)) continue;
  const needsRequestId = shapeFields(op.request).some((f) => f.key === 'request_id' && f.required);
  const streaming = isStreaming(op);
  const method = {
    /**
     * @this {Client}
     * @param {Record<string, unknown>} [payload]
     * @param {{timeoutMs?: number}} [options]
     */
    [camel(op.name)](payload = {}, options = {}) {
      const request = needsRequestId && payload.request_id == null ? { ...payload, request_id: newRequestId() } : payload;
      return streaming ? this.stream(op.name, request) : this.call(op.name, request, options);
    },
  }[camel(op.name)];
  Object.defineProperty(Client.prototype, camel(op.name), { value: method, writable: true, configurable: true });
}
