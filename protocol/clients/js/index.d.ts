// Types of the public API of brain-wire-client (index.js). Written by hand;
// the message shapes and the per-opcode methods are generated from
// protocol/schema.json into messages.d.ts (scripts/generate.js), and
// test/types.test.js checks that this file names exactly what index.js exports.

/// <reference types="node" />

import type { Socket } from 'node:net';
import type { Answers, AuthOk, OpcodeMethods, Requests, StreamEnds, Welcome } from './messages.js';

export type * from './messages.js';

// --- the client ------------------------------------------------------------------------

/** The server's default wire port (spec/01-wire.md §1). */
export declare const DEFAULT_PORT: 9090;
/** Default wait for one answer, in milliseconds. */
export declare const DEFAULT_TIMEOUT_MS: number;

export interface ConnectOptions {
  apiKey: string;
  /** Default `127.0.0.1`. */
  host?: string;
  /** Default 9090. */
  port?: number;
  /** How the client names itself in HELLO; default `brain-js/0.1.0`. */
  clientName?: string;
  /** Default wait for each answer, in milliseconds; `Infinity` waits forever. */
  timeoutMs?: number;
  /** Wait for TCP connect plus HELLO and AUTH, in milliseconds. */
  connectTimeoutMs?: number;
}

export interface CallOptions {
  /** Wait for this answer, in milliseconds, instead of the client's default. */
  timeoutMs?: number;
}

/** Names of the opcodes answered with one message. */
export type CallOpcode = Exclude<keyof Requests & keyof Answers, keyof StreamEnds | 'HELLO'>;
/** Names of the opcodes answered with a stream. */
export type StreamOpcode = keyof StreamEnds & keyof Requests;

/** A pipelined connection to a Brain server, with one method per request opcode. */
export type ConnectedClient = Client & OpcodeMethods;

export declare class Client {
  /** Open a connection and complete HELLO and AUTH. */
  static connect(options: ConnectOptions): Promise<ConnectedClient>;
  /** Wrap a connected socket; `Client.connect()` also does the handshake. */
  constructor(socket: Socket, options?: { timeoutMs?: number });
  /** The server's WELCOME, once connected. */
  welcome: Welcome | null;
  /** The server's AUTH_OK, once authenticated. */
  authOk: AuthOk | null;
  /** The most requests that were ever in flight at once on this connection. */
  peakInFlight: number;
  /** True once the connection is over. */
  readonly closed: boolean;
  /** Largest request payload the server accepts. */
  readonly maxFrame: number;
  /** Requests the server lets be in flight at once. */
  readonly maxStreams: number;
  /** Requests whose answer has not ended, abandoned ones included. */
  readonly inFlight: number;
  /** Send request `name` and resolve to its answer, or reject with the server's typed error. */
  call<N extends CallOpcode>(name: N, payload?: Requests[N], options?: CallOptions): Promise<Answers[N]>;
  call(name: string, payload?: Record<string, unknown>, options?: CallOptions): Promise<Record<string, any>>;
  /** Send a request whose answer is a stream (SUBSCRIBE). */
  stream<N extends StreamOpcode>(name: N, payload?: Requests[N]): Promise<AnswerStream<Answers[N], StreamEnds[N]>>;
  stream(name: string, payload?: Record<string, unknown>): Promise<AnswerStream>;
  /** Ask the server to finish what is in flight and close. */
  bye(): Promise<void>;
  /** Close now; requests in flight fail with ConnectionClosed. */
  close(): void;
}

/**
 * An answer that is a stream of frames (SUBSCRIBE): iterate it for each
 * message; leaving the loop early sends CANCEL_STREAM.
 */
export declare class AnswerStream<T = Record<string, any>, End = Record<string, any>> implements AsyncIterable<T> {
  /** The stream id the answer travels on (what UNSUBSCRIBE and CANCEL_STREAM name). */
  readonly streamId: number;
  /** The stream-end message once the server ended the stream, else null. Never rejects. */
  readonly end: Promise<End | null>;
  /** Ask the server to end the stream (CANCEL_STREAM). */
  cancel(): Promise<{ cancelled: boolean }>;
  [Symbol.asyncIterator](): AsyncGenerator<T, void, undefined>;
}

/** A fresh UUIDv7 request id (16 bytes). */
export declare function newRequestId(): Buffer;

// --- times -----------------------------------------------------------------------------

/** Nanoseconds since the epoch for a Date: its milliseconds × 1,000,000n. Throws EncodeError (a TypeError) for an invalid Date. */
export declare function nanosFromDate(date: Date): bigint;
/** The Date of a time in nanoseconds, rounded down to the millisecond. */
export declare function dateFromNanos(nanos: number | bigint): Date;

// --- errors ----------------------------------------------------------------------------

export interface BrainErrorOptions {
  field?: string;
  retryAfterMs?: number;
  cause?: unknown;
}

/** Base of every error the server can send, and of the client's own connection errors. */
export declare class BrainError extends Error {
  /** Wire code of the class, or 0 for client-side errors. */
  static code: number;
  /** Wire name of the class (`NOT_FOUND`), or ''. */
  static wireName: string;
  static retryable: boolean;
  static register<C extends typeof BrainError>(cls: C): C;
  constructor(message: string, options?: BrainErrorOptions);
  code: number;
  wireName: string;
  retryable: boolean;
  /** The key path the server blamed (`filters.as_of`, `evidence[0].memory`). */
  field: string | undefined;
  /** How long the server asked to wait before retrying. */
  retryAfterMs: number | undefined;
}
/** The byte stream or handshake is broken; the connection closes. */
export declare class ConnectionFault extends BrainError {}
/** The request itself is wrong; fix it, do not retry. */
export declare class RequestError extends BrainError {}
/** Who is asking is not allowed. */
export declare class AccessError extends BrainError {}
/** The stored state forbids it. */
export declare class StateError extends BrainError {}
/** Try again later, unchanged. */
export declare class TransientError extends BrainError {}

export declare class BadFrame extends ConnectionFault {}
export declare class FrameTooLarge extends ConnectionFault {}
export declare class VersionNotSupported extends ConnectionFault {}
/** Client side: the connection ended before the answer came. */
export declare class ConnectionClosed extends ConnectionFault {}
export declare class BadOpcode extends RequestError {}
export declare class BadStream extends RequestError {}
export declare class InvalidArgument extends RequestError {}
export declare class AsOfInFuture extends RequestError {}
export declare class OverBudget extends RequestError {}
export declare class TxnTooLarge extends RequestError {}
export declare class Unauthenticated extends AccessError {}
export declare class PermissionDenied extends AccessError {}
export declare class NotFound extends StateError {}
export declare class IdempotencyConflict extends StateError {}
export declare class Conflict extends StateError {}
export declare class TxnExpired extends StateError {}
export declare class CardinalityViolation extends StateError {}
export declare class Forgotten extends StateError {}
export declare class StreamLimit extends TransientError {}
export declare class Overloaded extends TransientError {}
export declare class Unavailable extends TransientError {}
/** Client side: no answer within the request's timeout. */
export declare class RequestTimeout extends TransientError {}
/** A server bug; the message names a log id. */
export declare class Internal extends BrainError {}
/** An error code this client does not know; keeps what the server said. */
export declare class UnknownError extends BrainError {
  constructor(code: number, wireName: string, message: string, options: { retryable: boolean; field?: string; retryAfterMs?: number });
}

/** A request value that cannot be encoded as the schema asks; nothing was sent. */
export declare class EncodeError extends TypeError {
  constructor(message: string, field: string);
  field: string;
}

/** An ERROR payload as the wire carries it. */
export interface ErrorPayload {
  code: number | bigint;
  name: string;
  message: string;
  retryable: boolean;
  field?: string;
  retry_after_ms?: number | bigint;
}

/** Every registered error class, by wire code. */
export declare function registeredErrors(): Map<number, typeof BrainError>;
/** The typed error an ERROR payload describes. */
export declare function errorFromWire(payload: ErrorPayload): BrainError;
/** The ERROR payload of a typed error. */
export declare function errorToWire(error: BrainError): Record<string, unknown>;

// --- CBOR ------------------------------------------------------------------------------

/** A number to send as a CBOR float even when integral. */
export declare class Float {
  constructor(value: number);
  readonly value: number;
}
/** Shorthand for `new Float(value)`. */
export declare function float(value: number): Float;
/** A tagged item this layer gives no meaning to. */
export declare class Tag {
  constructor(tag: number | bigint, value: unknown);
  readonly tag: number | bigint;
  readonly value: unknown;
}
/** A simple value other than false, true, null and undefined. */
export declare class Simple {
  constructor(value: number);
  readonly value: number;
}
/** The input is not one well-formed CBOR item within the limits. */
export declare class CborError extends Error {
  constructor(message: string, offset?: number);
  offset: number | undefined;
}
/** One CBOR item in the server's exact encoding. */
export declare function encodeCbor(value: unknown): Buffer;
/** Decode one CBOR item, strictly. */
export declare function decodeCbor(data: Uint8Array): unknown;

// --- frames ----------------------------------------------------------------------------

export interface Frame {
  opcode: number;
  streamId: number;
  flags: number;
  eos: boolean;
  /** Raw bytes, CRC already checked. */
  payload: Buffer;
}
export declare const HEADER_SIZE: number;
export declare const FLAG_EOS: number;
export declare const MAX_FRAME_CEILING: number;
/** Turns a byte stream into frames. */
export declare class FrameReader {
  constructor(maxFrame?: number);
  readonly maxFrame: number;
  /** Bytes received but not yet part of a returned frame. */
  readonly buffered: number;
  /** Add received bytes; return every frame they complete, in order. */
  feed(data: Uint8Array): Frame[];
}
/** One frame: header with both CRC32C values, then the payload. */
export declare function encodeFrame(opcode: number, streamId: number, payload: Uint8Array, options?: { eos?: boolean }): Buffer;

// --- the contract and payloads ---------------------------------------------------------

export interface OpcodeInfo {
  name: string;
  code: number;
  permission: string | null;
  /** May travel on stream 0. */
  control: boolean;
  /** The request's shape name in schema.json. */
  request: string;
  /** The answer's shape name (each frame, for a streaming answer). */
  response: string;
  /** The shape of the EOS frame that ends a streaming answer. */
  streamEnd: string | null;
}
export declare const OPCODES: readonly OpcodeInfo[];
export declare const OPCODE_BY_NAME: Map<string, OpcodeInfo>;
export declare const OPCODE_BY_CODE: Map<number, OpcodeInfo>;
export declare const ERROR_OPCODE: number;
export declare const RESPONSE_BIT: number;
export declare const STREAMING_OPCODES: Set<string>;
/** The payload bytes of a frame of `opcode` carrying `message`, encoded as the schema asks. */
export declare function encodePayload(opcode: number, message: Record<string, unknown>, eos?: boolean): Buffer;
/** Decode the payload of a frame of `opcode` into the message a caller reads. */
export declare function decodeMessage(opcode: number, payload: Uint8Array, eos?: boolean): Record<string, any>;
/** Decode a payload: one CBOR map with text keys. */
export declare function decodePayload(payload: Uint8Array): Record<string, unknown>;
/** A payload that is not one CBOR map with text keys. */
export declare class PayloadError extends Error {
  constructor(message: string, cause?: unknown);
}
/** The wire form of a vector: little-endian float32 values. */
export declare function float32Bytes(values: Float32Array): Buffer;
/** A vector as read from the wire. */
export declare function float32Values(bytes: Uint8Array): Float32Array;
/** CRC32C (Castagnoli) of `bytes`, continuing from `crc`. */
export declare function crc32c(bytes: Uint8Array, crc?: number): number;
/** Mirror JSON (golden vectors' notation) to the values the encoder takes. */
export declare function fromMirror(value: unknown): unknown;
/** Decoded values to mirror JSON. */
export declare function toMirror(value: unknown): unknown;
