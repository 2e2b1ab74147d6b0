#!/usr/bin/env bash
# The two things a newcomer does on a fresh Debian 12 machine:
#   bash tools/dev.sh demo   install what is needed, build, run generation with the bundled model
#   bash tools/dev.sh test   install what is needed, build, run the test suite
# and for developers:
#   bash tools/dev.sh test-full        the tests and the extended tier (the whole suite at subgroup size 4)
#   bash tools/dev.sh test-asan        the file, option and tree tests + CLI scripts under ASan + UBSan
#   bash tools/dev.sh fuzz [SECONDS]   build the libFuzzer harnesses, run each SECONDS (default 60)
#   bash tools/dev.sh soak             10,000 tokens per strategy against ar, memory flat
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ libvulkan-dev libvulkan-volk-dev glslc spirv-tools mesa-vulkan-drivers
          vulkan-validationlayers doctest-dev nlohmann-json3-dev libzip-dev python3 python3-numpy pkg-config)
# The tests save pytorch_model.bin fixtures with torch.save (Debian's torch 1.13); the bench_suite
# test draws tools/compare_bench.py's PNG with matplotlib.
test_packages=(python3-torch python3-matplotlib)

install_deps() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return
  echo "installing: ${missing[*]}" >&2
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >&2
}

configure() {
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >&2
}

build() {
  configure
  cmake --build build -j "$(nproc)" >&2
}

# Vulkan tools want a runtime dir; a fresh container or CI shell may not have one.
if [ -z "${XDG_RUNTIME_DIR:-}" ]; then
  export XDG_RUNTIME_DIR="/tmp/vkspec-runtime-$(id -u)"
  mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
fi

case "${1:-}" in
  demo)
    install_deps
    build
    shift
    build/vkspec devices >&2
    # The bundled demo (models/README.md): a byte-level verifier and two EAGLE heads trained here,
    # with a context of 256 bytes. Sampled at temperature 0.7 (greedy decoding of a model this
    # small soon loops); merge's output has exactly the verifier's sampling distribution.
    # Text streams to stdout; tau and tokens/s follow on stderr.
    exec build/vkspec generate -m models/verifier.gguf --heads models/head1,models/head2 --strategy merge \
      --temp 0.7 --top-p 0.9 --seed 2 \
      -p "${VKSPEC_PROMPT:-The kernel provides a simple interface for}" -n "${VKSPEC_TOKENS:-170}" "$@"
    ;;
  test|test-full)
    # test: every entry but the extended tier (the whole suite again at subgroup size 4,
    # CMakeLists.txt); test-full: all of them.
    tier=(-LE extended)
    [ "$1" = test-full ] && tier=()
    packages+=("${test_packages[@]}")
    install_deps
    build
    cd build
    exec ctest --output-on-failure -j 2 "${tier[@]}"
    ;;
  fuzz)
    # The libFuzzer harnesses (tests/fuzz/) under ASan + UBSan, each run for SECONDS (default 60)
    # from seeds derived from models/ and ../shared/; exits non-zero if any harness found a crash
    # (its input is left in build-fuzz/artifacts/<harness>/).
    packages+=(clang-14 libfuzzer-14-dev libclang-rt-14-dev)
    install_deps
    secs="${2:-60}"
    # The shaders come from build/ (compiled there if they are not yet; cmake/shaders.cmake).
    configure
    CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DVKSPEC_FUZZ=ON -DBUILD_TESTING=OFF -DVKSPEC_SHADERS_FROM="$PWD/build" >&2
    cmake --build build-fuzz -j "$(nproc)" --target fuzzers fuzz_seeds >&2
    failed=0
    for h in build-fuzz/fuzz_*; do
      [ -f "$h" ] && [ -x "$h" ] || continue
      name=$(basename "$h")
      rm -rf "build-fuzz/artifacts/$name"  # this run's findings only
      mkdir -p "build-fuzz/corpus/$name" "build-fuzz/artifacts/$name"
      rc=0
      "$h" -max_total_time="$secs" -timeout=25 -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$name/" \
        "build-fuzz/corpus/$name" "build-fuzz/fuzz-seeds/$name" > "build-fuzz/$name.log" 2>&1 || rc=$?
      execs=$(awk '/stat::number_of_executed_units/ {print $2}' "build-fuzz/$name.log")
      found=$(find "build-fuzz/artifacts/$name" -type f | wc -l)
      echo "$name: ${execs:-?} execs in ${secs}s, exit $rc, $found crash input(s); log build-fuzz/$name.log"
      [ "$rc" -eq 0 ] && [ "$found" -eq 0 ] || failed=1
    done
    exit $failed
    ;;
  test-asan)
    # The suite built with AddressSanitizer + UndefinedBehaviorSanitizer (any report fails the
    # test). Leak checking is off: the Vulkan loader and lavapipe are unloaded before exit, so
    # their allocations cannot be symbolized or suppressed; the soak test checks growth instead.
    packages+=("${test_packages[@]}")
    install_deps
    configure
    cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVKSPEC_SANITIZE=ON \
      -DVKSPEC_SHADERS_FROM="$PWD/build" >&2
    # Only what the five entries below run: the suite binary, the CLI, the C API's hostile and
    # threaded callers (with the shared library they link) and the two file tools the CLI checks call.
    cmake --build build-asan -j "$(nproc)" --target vkspec_tests vkspec_cli vkspec_capi_hostile_test \
      vkspec_capi_threads_test make_random_gguf llama2c_to_gguf >&2
    cd build-asan
    export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
    export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
    exec ctest --output-on-failure -j 2 -R '^(suite_sanitized|cli|hostile|capi_hostile|capi_threads)$'
    ;;
  soak)
    # Long run: VKSPEC_SOAK_TOKENS (default 10,000) tokens per strategy against ar, memory flat.
    install_deps
    build
    export VKSPEC_SOAK_TOKENS="${VKSPEC_SOAK_TOKENS:-10000}"
    exec build/vkspec_tests -tc='soak*' -s
    ;;
  *)
    echo "usage: bash tools/dev.sh demo|test|test-full|test-asan|fuzz [SECONDS]|soak" >&2
    exit 2
    ;;
esac
