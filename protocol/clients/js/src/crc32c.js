// CRC32C (Castagnoli), the checksum of both CRC fields of a frame header
// (spec/01-wire.md §1). Not zlib's CRC32: the polynomial differs, and so does every
// answer. Table-driven, one byte at a time; frames are small enough that the
// slicing-by-8 variants are not worth their code.

/** The Castagnoli polynomial, bit-reversed (iSCSI, ext4, SCTP). */
const POLYNOMIAL = 0x82f63b78;

const TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ POLYNOMIAL : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

/**
 * Continue a CRC32C over `bytes`; start with `crc = 0`.
 * @param {Uint8Array} bytes
 * @param {number} [crc]
 * @returns {number} an unsigned 32-bit value
 */
export function crc32c(bytes, crc = 0) {
  let c = ~crc >>> 0;
  for (let i = 0; i < bytes.length; i++) c = TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return ~c >>> 0;
}
