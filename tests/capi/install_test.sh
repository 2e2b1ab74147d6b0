#!/usr/bin/env bash
# `cmake --install` into a temporary prefix, then a tiny C consumer built against it twice: with
# find_package(vkspec) (imported target vkspec::vkspec) and with pkg-config. Also checks the shared
# library's SONAME and that it exports nothing but vkspec_* symbols.
#   install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
prefix="$tmp/prefix"
test -f "$prefix/include/vkspec/vkspec.h"
lib=$(find "$prefix" -name 'libvkspec.so.*.*.*' | head -1)
[ -n "$lib" ] || { echo "no libvkspec.so.X.Y.Z installed" >&2; exit 1; }
soname=$(readelf -d "$lib" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = "libvkspec.so.0" ] || { echo "SONAME is '$soname', expected libvkspec.so.0" >&2; exit 1; }
others=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^vkspec_' | grep -v '^$' || true)
[ -z "$others" ] || { echo "exported symbols other than vkspec_*:" >&2; echo "$others" | head >&2; exit 1; }
count=$(nm -D --defined-only "$lib" | grep -c ' T vkspec_')
[ "$count" -ge 20 ] || { echo "only $count vkspec_* functions exported" >&2; exit 1; }

mkdir -p "$tmp/consumer"
cat > "$tmp/consumer/consumer.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <vkspec/vkspec.h>
int main(void) {
  vkspec_runtime_desc d;
  vkspec_runtime_desc_init(&d);
  vkspec_runtime* rt = NULL;
  d.instance = (VkInstance)1; /* only part of a borrowed device: refused, naming what is missing */
  vkspec_status s = vkspec_runtime_create(&d, &rt);
  printf("%s: %s\n", vkspec_status_name(s), vkspec_last_error(NULL));
  return s == VKSPEC_ERROR_INVALID_ARGUMENT && rt == NULL && strstr(vkspec_last_error(NULL), "physical_device") ? 0 : 1;
}
C
cat > "$tmp/consumer/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.20)
project(consumer C)
find_package(vkspec 0.2 REQUIRED)
add_executable(consumer consumer.c)
target_link_libraries(consumer PRIVATE vkspec::vkspec)
C
cmake -S "$tmp/consumer" -B "$tmp/consumer/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/consumer/build" >/dev/null
"$tmp/consumer/build/consumer"

pc=$(dirname "$(find "$prefix" -name vkspec.pc | head -1)")
export PKG_CONFIG_PATH="$pc"
cc -std=c99 -Wall -o "$tmp/consumer/pc_consumer" "$tmp/consumer/consumer.c" $(pkg-config --cflags --libs vkspec)
LD_LIBRARY_PATH="$(pkg-config --variable=libdir vkspec)" "$tmp/consumer/pc_consumer"
echo "install: find_package and pkg-config consumers built and ran against $prefix"
