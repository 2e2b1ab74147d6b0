/* Writes w x h RGBA8 pixels (row-major, top row first) as a PNG; returns 1 on success. */
#ifndef FRAME_LOOP_PNG_H
#define FRAME_LOOP_PNG_H
#include <stdint.h>
int png_write_rgba(const char* path, const uint8_t* rgba, uint32_t w, uint32_t h);
#endif
