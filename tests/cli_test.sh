#!/usr/bin/env bash
# End-to-end checks of the command-line tool: parseable JSON on stdout, clear errors on bad input.
set -u
vkspec="$1"
fail=0
check() { if ! eval "$2"; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }

out=$("$vkspec" devices --json 2>/dev/null)
check "devices --json is JSON with a chosen device" \
  "printf '%s' \"\$out\" | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); assert any(x[\"chosen\"] for x in d[\"devices\"])'"
err=$(VKSPEC_DEVICE=no-such-gpu "$vkspec" devices 2>&1 >/dev/null); rc=$?
check "unknown device is a clear error" "[ $rc -ne 0 ] && printf '%s' \"\$err\" | grep -q 'no Vulkan device matches'"
err=$("$vkspec" devices --device 99 2>&1 >/dev/null); rc=$?
check "device index out of range is a clear error" "[ $rc -ne 0 ] && printf '%s' \"\$err\" | grep -q 'does not exist'"
err=$("$vkspec" devices --bogus 2>&1 >/dev/null); rc=$?
check "unknown option is refused" "[ $rc -ne 0 ] && printf '%s' \"\$err\" | grep -q 'unknown option'"
exit $fail
