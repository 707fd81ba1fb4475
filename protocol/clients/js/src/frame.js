// Frames: the fixed 32-byte header of spec/01-wire.md §1 and an incremental reader.
// No I/O here: FrameReader takes whatever bytes arrived and hands back the
// whole frames they complete, validating each header the moment its 32 bytes
// are in, so an oversize length is refused before any payload is buffered.

import { crc32c } from './crc32c.js';
import { BadFrame, FrameTooLarge } from './errors.js';

export const MAGIC = Buffer.from('BRN0', 'ascii');
export const PROTOCOL_VERSION = 1;
export const HEADER_SIZE = 32;
/** The only defined flag bit: last frame of a stream's answer. */
export const FLAG_EOS = 0x80;
/** The payload length field is 24 bits wide; nothing can exceed it. */
export const MAX_FRAME_CEILING = 2 ** 24 - 1;
/** The negotiated payload limit before WELCOME says otherwise (spec/01-wire.md §1). */
export const DEFAULT_MAX_FRAME = MAX_FRAME_CEILING;
/** Stream ids are u32. */
export const MAX_STREAM_ID = 2 ** 32 - 1;

/**
 * @typedef {object} Frame
 * @property {number} opcode
 * @property {number} streamId
 * @property {number} flags
 * @property {boolean} eos
 * @property {Buffer} payload  raw bytes, CRC already checked
 */

/**
 * Build one frame: header with both CRC32C values, then the payload.
 * @param {number} opcode u16
 * @param {number} streamId u32
 * @param {Uint8Array} payload
 * @param {{eos?: boolean}} [options]
 * @returns {Buffer}
 */
export function encodeFrame(opcode, streamId, payload, { eos = false } = {}) {
  if (!Number.isInteger(opcode) || opcode < 0 || opcode > 0xffff) throw new RangeError(`opcode ${opcode} is not a u16`);
  if (!Number.isInteger(streamId) || streamId < 0 || streamId > MAX_STREAM_ID) {
    throw new RangeError(`stream id ${streamId} is not a u32`);
  }
  if (payload.length > MAX_FRAME_CEILING) throw new RangeError(`payload of ${payload.length} bytes does not fit a frame`);
  const frame = Buffer.alloc(HEADER_SIZE + payload.length); // zeroed: reserved bytes stay 0
  MAGIC.copy(frame, 0);
  frame[4] = PROTOCOL_VERSION;
  frame.writeUInt16BE(opcode, 5);
  frame[7] = eos ? FLAG_EOS : 0;
  frame.writeUInt32BE(streamId, 12);
  frame.writeUIntBE(payload.length, 16, 3);
  frame.writeUInt32BE(payload.length ? crc32c(payload) : 0, 20);
  frame.writeUInt32BE(headerCrc(frame), 8);
  frame.set(payload, HEADER_SIZE);
  return frame;
}

/** CRC32C over bytes 0–7 followed by bytes 12–31. @param {Uint8Array} header */
function headerCrc(header) {
  return crc32c(header.subarray(12, HEADER_SIZE), crc32c(header.subarray(0, 8)));
}

/**
 * Validate a 32-byte header in the server's order (spec/01-wire.md §1).
 * @param {Buffer} header
 * @param {number} maxFrame
 */
export function parseHeader(header, maxFrame) {
  if (header.length !== HEADER_SIZE) throw new BadFrame(`a frame header is ${HEADER_SIZE} bytes, got ${header.length}`);
  if (!header.subarray(0, 4).equals(MAGIC)) {
    throw new BadFrame(`bad magic ${header.subarray(0, 4).toString('hex')} (expected ${MAGIC.toString('hex')})`);
  }
  if (header[4] !== PROTOCOL_VERSION) throw new BadFrame(`frame version ${header[4]} is not ${PROTOCOL_VERSION}`);
  const expected = header.readUInt32BE(8);
  const actual = headerCrc(header);
  if (expected !== actual) {
    throw new BadFrame(`header CRC ${hex32(expected)} does not match ${hex32(actual)}`);
  }
  const flags = header[7];
  if (flags & ~FLAG_EOS) throw new BadFrame(`undefined flag bits set: 0x${flags.toString(16).padStart(2, '0')}`);
  if (header[19] !== 0 || header.subarray(24, 32).some((b) => b !== 0)) {
    throw new BadFrame('reserved header bytes are not zero');
  }
  const length = header.readUIntBE(16, 3);
  const payloadCrc = header.readUInt32BE(20);
  if (length > maxFrame) throw new FrameTooLarge(`frame payload of ${length} bytes is over max_frame ${maxFrame}`);
  if (length === 0 && payloadCrc !== 0) throw new BadFrame('payload CRC must be 0 for an empty payload');
  return {
    opcode: header.readUInt16BE(5),
    flags,
    streamId: header.readUInt32BE(12),
    length,
    payloadCrc,
  };
}

/** @param {number} n */
const hex32 = (n) => n.toString(16).padStart(8, '0');

/** Turns a byte stream into frames, one `feed` at a time. Unusable after it throws. */
export class FrameReader {
  /** @param {number} [maxFrame] largest payload accepted */
  constructor(maxFrame = DEFAULT_MAX_FRAME) {
    if (!(maxFrame > 0 && maxFrame <= MAX_FRAME_CEILING)) throw new RangeError(`maxFrame must be in 1..${MAX_FRAME_CEILING}`);
    this.maxFrame = maxFrame;
    /** @type {Buffer[]} */
    this.chunks = [];
    this.size = 0;
    /** @type {ReturnType<typeof parseHeader> | null} */
    this.header = null;
  }

  /** Bytes received but not yet part of a returned frame. */
  get buffered() {
    return this.size;
  }

  /** @param {number} count */
  takeBytes(count) {
    const all = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks, this.size);
    const taken = all.subarray(0, count);
    const rest = all.subarray(count);
    this.chunks = rest.length ? [rest] : [];
    this.size = rest.length;
    return taken;
  }

  /**
   * Add received bytes; return every frame they complete, in order.
   * @param {Uint8Array} data
   * @returns {Frame[]}
   */
  feed(data) {
    if (data.length) {
      // A copy: the caller may reuse its buffer; the payloads we return must not change.
      this.chunks.push(Buffer.from(data));
      this.size += data.length;
    }
    /** @type {Frame[]} */
    const frames = [];
    for (;;) {
      if (this.header === null) {
        if (this.size < HEADER_SIZE) return frames;
        this.header = parseHeader(this.takeBytes(HEADER_SIZE), this.maxFrame);
      }
      const header = this.header;
      if (this.size < header.length) return frames;
      const payload = this.takeBytes(header.length);
      this.header = null;
      if (header.length && crc32c(payload) !== header.payloadCrc) {
        throw new BadFrame(
          `payload CRC mismatch on stream ${header.streamId} (opcode 0x${header.opcode.toString(16).padStart(4, '0')})`,
        );
      }
      frames.push({
        opcode: header.opcode,
        streamId: header.streamId,
        flags: header.flags,
        eos: Boolean(header.flags & FLAG_EOS),
        payload,
      });
    }
  }
}
