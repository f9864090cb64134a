// Small real PNG files (signature, IHDR, zlib-compressed IDAT, IEND, with CRCs), for the stand-ins
// of an image model: the offline model of the playground and the fake Gemini of the tests.
import zlib from "node:zlib";

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(buf) {
  let c = 0xffffffff;
  for (const b of buf) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function chunk(type, data) {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, "latin1");
  data.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}

/** A `width`×`height` RGB PNG: a diagonal gradient tinted by `seed` (0–255), so different
 *  prompts give different pictures. `noise`: random pixels, which do not compress (a large file). */
export function makePng(width = 64, height = 64, seed = 0, { noise = false } = {}) {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // RGB
  const row = 1 + width * 3;
  const raw = Buffer.alloc(row * height);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = y * row + 1 + x * 3;
      if (noise) {
        raw[i] = Math.random() * 256;
        raw[i + 1] = Math.random() * 256;
        raw[i + 2] = Math.random() * 256;
      } else {
        raw[i] = (x * 255) / width;
        raw[i + 1] = (y * 255) / height;
        raw[i + 2] = seed & 0xff;
      }
    }
  }
  const signature = Buffer.from("89504e470d0a1a0a", "hex");
  return Buffer.concat([signature, chunk("IHDR", ihdr), chunk("IDAT", zlib.deflateSync(raw)), chunk("IEND", Buffer.alloc(0))]);
}

/** A seed from a text (the same prompt, the same picture). */
export function seedOf(text) {
  let h = 0;
  for (const ch of String(text)) h = (h * 31 + ch.codePointAt(0)) >>> 0;
  return h & 0xff;
}
