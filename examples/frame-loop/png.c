/* A minimal PNG writer: 8-bit RGBA, the image in zlib "stored" (uncompressed) deflate blocks,
 * with the CRC-32 of each chunk and the Adler-32 of the zlib stream. */
#include "png.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t crc_table[256];

static void crc_init(void) {
  for (uint32_t n = 0; n < 256; ++n) {
    uint32_t c = n;
    for (int k = 0; k < 8; ++k) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
    crc_table[n] = c;
  }
}

static uint32_t crc(uint32_t c, const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) c = crc_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c;
}

static void be32(uint8_t* p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static int chunk(FILE* f, const char* type, const uint8_t* data, uint32_t n) {
  uint8_t hdr[8];
  be32(hdr, n);
  memcpy(hdr + 4, type, 4);
  uint32_t c = crc(0xffffffffu, hdr + 4, 4);
  c = crc(c, data, n) ^ 0xffffffffu;
  uint8_t tail[4];
  be32(tail, c);
  return fwrite(hdr, 1, 8, f) == 8 && (n == 0 || fwrite(data, 1, n, f) == n) && fwrite(tail, 1, 4, f) == 4;
}

int png_write_rgba(const char* path, const uint8_t* rgba, uint32_t w, uint32_t h) {
  crc_init();
  const size_t row = (size_t)w * 4 + 1, raw_n = row * h;  /* each row: filter byte 0, then pixels */
  const size_t blocks = (raw_n + 65534) / 65535;
  const size_t z_n = 2 + raw_n + blocks * 5 + 4;
  uint8_t* raw = malloc(raw_n);
  uint8_t* z = malloc(z_n);
  if (!raw || !z) return free(raw), free(z), 0;
  for (uint32_t y = 0; y < h; ++y) {
    raw[y * row] = 0;
    memcpy(raw + y * row + 1, rgba + (size_t)y * w * 4, (size_t)w * 4);
  }
  size_t k = 0;
  z[k++] = 0x78, z[k++] = 0x01;  /* deflate, 32K window, no dictionary; (0x78 0x01) % 31 == 0 */
  uint32_t a = 1, b = 0;
  for (size_t off = 0; off < raw_n; off += 65535) {
    const size_t n = raw_n - off < 65535 ? raw_n - off : 65535;
    z[k++] = off + n == raw_n;  /* BFINAL on the last block, BTYPE 00 (stored) */
    z[k++] = (uint8_t)n, z[k++] = (uint8_t)(n >> 8), z[k++] = (uint8_t)~n, z[k++] = (uint8_t)(~n >> 8);
    memcpy(z + k, raw + off, n);
    k += n;
  }
  for (size_t i = 0; i < raw_n; ++i) a = (a + raw[i]) % 65521, b = (b + a) % 65521;
  be32(z + k, (b << 16) | a);
  k += 4;
  uint8_t ihdr[13];
  be32(ihdr, w), be32(ihdr + 4, h);
  ihdr[8] = 8, ihdr[9] = 6, ihdr[10] = 0, ihdr[11] = 0, ihdr[12] = 0;  /* 8-bit RGBA, no interlace */
  FILE* f = fopen(path, "wb");
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  int ok = f && fwrite(sig, 1, 8, f) == 8 && chunk(f, "IHDR", ihdr, 13) && chunk(f, "IDAT", z, (uint32_t)k) &&
           chunk(f, "IEND", NULL, 0);
  if (f) ok = fclose(f) == 0 && ok;
  free(raw), free(z);
  return ok;
}
