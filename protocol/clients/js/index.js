// Brain wire protocol v1 client for Node.js 20: see README.md.
export { Client, AnswerStream, newRequestId, DEFAULT_PORT, DEFAULT_TIMEOUT_MS } from './src/client.js';
export * from './src/errors.js';
export { Float, float, Tag, Simple, CborError, encode as encodeCbor, decode as decodeCbor } from './src/cbor.js';
export { FrameReader, encodeFrame, HEADER_SIZE, FLAG_EOS, MAX_FRAME_CEILING } from './src/frame.js';
export {
  OPCODES, OPCODE_BY_NAME, OPCODE_BY_CODE, ERROR_OPCODE, RESPONSE_BIT,
  encodePayload, decodeMessage, decodePayload, PayloadError, STREAMING_OPCODES, float32Bytes, float32Values,
  nanosFromDate, dateFromNanos,
} from './src/wire.js';
export { crc32c } from './src/crc32c.js';
export { fromMirror, toMirror } from './src/mirror.js';
