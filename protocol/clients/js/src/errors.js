// The error tree, the same classes as brain/errors.py, grouped by whose fault
// it is. Every class with a wire code is registered once; a duplicate code or
// name is a programming error caught at load time, and a test checks the table
// against protocol/protocol.json.
//
//   BrainError
//   ├── ConnectionFault          the byte stream or handshake is broken; closes
//   │   ├── BadFrame                   0x0001
//   │   ├── FrameTooLarge              0x0004
//   │   ├── VersionNotSupported        0x0020
//   │   └── ConnectionClosed           client side: the connection ended first
//   ├── RequestError             the request itself is wrong; fix it, do not retry
//   │   ├── BadOpcode                  0x0002
//   │   ├── BadStream                  0x0006
//   │   ├── InvalidArgument            0x0040  (names the offending `field`)
//   │   ├── AsOfInFuture               0x0041
//   │   ├── OverBudget                 0x0070
//   │   └── TxnTooLarge                0x0071
//   ├── AccessError              who is asking is not allowed
//   │   ├── Unauthenticated            0x0030
//   │   └── PermissionDenied           0x0031
//   ├── StateError               the stored state forbids it
//   │   ├── NotFound                   0x0050
//   │   ├── IdempotencyConflict        0x0060
//   │   ├── Conflict                   0x0061
//   │   ├── TxnExpired                 0x0062
//   │   ├── CardinalityViolation       0x0063
//   │   └── Forgotten                  0x0064
//   ├── TransientError           try again later, unchanged
//   │   ├── StreamLimit                0x0005
//   │   ├── Overloaded                 0x0072  (with `retryAfterMs`)
//   │   ├── Unavailable                0x0090
//   │   └── RequestTimeout             client side: no answer in time
//   ├── Internal                 a server bug; the message names a log id  0x0080
//   └── UnknownError             a code this client does not know
//
// Separately, EncodeError (a TypeError) is thrown before anything is sent when
// a request value cannot be encoded as the schema asks (a string where bytes
// belong, 1.5 for an integer, ...).

/** @type {Map<number, typeof BrainError>} */
const BY_CODE = new Map();

export class BrainError extends Error {
  /** Wire code, or 0 for client-side errors. */
  static code = 0;
  /** Wire name (`NOT_FOUND`), or '' for client-side errors. */
  static wireName = '';
  static retryable = false;

  /**
   * @param {string} message
   * @param {{field?: string, retryAfterMs?: number, cause?: unknown}} [options]
   */
  constructor(message, { field, retryAfterMs, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    const cls = /** @type {typeof BrainError} */ (this.constructor);
    this.name = cls.name;
    /** @type {number} */
    this.code = cls.code;
    /** @type {string} */
    this.wireName = cls.wireName;
    /** @type {boolean} */
    this.retryable = cls.retryable;
    /** The key path the server blamed (`filters.as_of`, `evidence[0].memory`). */
    this.field = field;
    /** How long the server asked us to wait before retrying. */
    this.retryAfterMs = retryAfterMs;
  }

  /**
   * Register a class under its wire code; rejects duplicates.
   * @param {typeof BrainError} cls
   */
  static register(cls) {
    if (BY_CODE.has(cls.code)) throw new Error(`wire code ${cls.code} registered twice`);
    if ([...BY_CODE.values()].some((c) => c.wireName === cls.wireName)) {
      throw new Error(`wire name ${cls.wireName} registered twice`);
    }
    BY_CODE.set(cls.code, cls);
    return cls;
  }
}

export class ConnectionFault extends BrainError {}
export class RequestError extends BrainError {}
export class AccessError extends BrainError {}
export class StateError extends BrainError {}
export class TransientError extends BrainError {
  static retryable = true;
}

export class BadFrame extends ConnectionFault {
  static code = 0x0001;
  static wireName = 'BAD_FRAME';
}

export class BadOpcode extends RequestError {
  static code = 0x0002;
  static wireName = 'BAD_OPCODE';
}

export class FrameTooLarge extends ConnectionFault {
  static code = 0x0004;
  static wireName = 'FRAME_TOO_LARGE';
}

export class StreamLimit extends TransientError {
  static code = 0x0005;
  static wireName = 'STREAM_LIMIT';
}

export class BadStream extends RequestError {
  static code = 0x0006;
  static wireName = 'BAD_STREAM';
}

export class VersionNotSupported extends ConnectionFault {
  static code = 0x0020;
  static wireName = 'VERSION_NOT_SUPPORTED';
}

export class Unauthenticated extends AccessError {
  static code = 0x0030;
  static wireName = 'UNAUTHENTICATED';
}

export class PermissionDenied extends AccessError {
  static code = 0x0031;
  static wireName = 'PERMISSION_DENIED';
}

export class InvalidArgument extends RequestError {
  static code = 0x0040;
  static wireName = 'INVALID_ARGUMENT';
}

export class AsOfInFuture extends RequestError {
  static code = 0x0041;
  static wireName = 'AS_OF_IN_FUTURE';
}

export class NotFound extends StateError {
  static code = 0x0050;
  static wireName = 'NOT_FOUND';
}

export class IdempotencyConflict extends StateError {
  static code = 0x0060;
  static wireName = 'IDEMPOTENCY_CONFLICT';
}

export class Conflict extends StateError {
  static code = 0x0061;
  static wireName = 'CONFLICT';
}

export class TxnExpired extends StateError {
  static code = 0x0062;
  static wireName = 'TXN_EXPIRED';
}

export class CardinalityViolation extends StateError {
  static code = 0x0063;
  static wireName = 'CARDINALITY_VIOLATION';
}

export class Forgotten extends StateError {
  static code = 0x0064;
  static wireName = 'FORGOTTEN';
}

export class OverBudget extends RequestError {
  static code = 0x0070;
  static wireName = 'OVER_BUDGET';
}

export class TxnTooLarge extends RequestError {
  static code = 0x0071;
  static wireName = 'TXN_TOO_LARGE';
}

export class Overloaded extends TransientError {
  static code = 0x0072;
  static wireName = 'OVERLOADED';
}

export class Internal extends BrainError {
  static code = 0x0080;
  static wireName = 'INTERNAL';
}

export class Unavailable extends TransientError {
  static code = 0x0090;
  static wireName = 'UNAVAILABLE';
}

for (const cls of [
  BadFrame, BadOpcode, FrameTooLarge, StreamLimit, BadStream, VersionNotSupported, Unauthenticated, PermissionDenied, InvalidArgument, AsOfInFuture, NotFound, IdempotencyConflict, Conflict, TxnExpired, CardinalityViolation, Forgotten, OverBudget, TxnTooLarge, Overloaded, Internal, Unavailable,
]) BrainError.register(cls);

/** Client side: the connection ended before the answer came. */
export class ConnectionClosed extends ConnectionFault {}
/** Client side: no answer within the request's timeout. */
export class RequestTimeout extends TransientError {}

/** An error code this client does not know; keeps what the server said. */
export class UnknownError extends BrainError {
  /**
   * @param {number} code @param {string} wireName @param {string} message
   * @param {{retryable: boolean, field?: string, retryAfterMs?: number}} options
   */
  constructor(code, wireName, message, { retryable, field, retryAfterMs }) {
    super(message, { field, retryAfterMs });
    this.code = code;
    this.wireName = wireName;
    // Trust the server's flag: this client cannot know better for a code it has never seen.
    this.retryable = retryable;
  }
}

/** A request value that cannot be encoded as the schema asks; nothing was sent. */
export class EncodeError extends TypeError {
  /** @param {string} message @param {string} field */
  constructor(message, field) {
    super(field ? `${field}: ${message}` : message);
    this.name = 'EncodeError';
    this.field = field;
  }
}

/** Every registered class, by wire code. @returns {Map<number, typeof BrainError>} */
export function registeredErrors() {
  return new Map(BY_CODE);
}

/**
 * Rebuild the typed error an ERROR payload describes (spec/01-wire.md §5).
 * @param {{code: number, name: string, message: string, retryable: boolean, field?: string, retry_after_ms?: number|bigint}} payload
 * @returns {BrainError}
 */
export function errorFromWire(payload) {
  const retryAfterMs = payload.retry_after_ms === undefined ? undefined : Number(payload.retry_after_ms);
  const cls = BY_CODE.get(Number(payload.code));
  if (cls === undefined) {
    return new UnknownError(Number(payload.code), String(payload.name), String(payload.message), {
      retryable: payload.retryable === true,
      field: payload.field,
      retryAfterMs,
    });
  }
  return new cls(String(payload.message), { field: payload.field, retryAfterMs });
}

/**
 * The ERROR payload of a typed error: the inverse of errorFromWire.
 * @param {BrainError} error
 */
export function errorToWire(error) {
  /** @type {Record<string, unknown>} */
  const payload = {
    code: error.code,
    name: error.wireName,
    message: error.message,
    retryable: error.retryable,
  };
  if (error.field !== undefined) payload.field = error.field;
  if (error.retryAfterMs !== undefined) payload.retry_after_ms = error.retryAfterMs;
  return payload;
}
