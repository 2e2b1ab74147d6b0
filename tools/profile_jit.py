#!/usr/bin/python3
"""Where a vkspec command spends lavapipe's time, instruction by instruction.

    /usr/bin/python3 tools/profile_jit.py [--warmup S] [--seconds S] [--top N] -- build/vkspec bench-kernels ...

lavapipe compiles every pipeline to x86 code at run time, so `perf report` shows only anonymous
addresses. This runs the command, samples it with `perf record` after the warm-up (pipelines
compiled, steady state), groups the samples into runs of JIT code, disassembles the hot runs from
the live process with gdb, and prints the hottest instructions and the instruction mix. It
answers questions like "is this loop bound by the arithmetic, by texel fetches (a call that
gathers each lane's 16 bytes one by one) or by spills (stores to the stack)". Needs perf and gdb
(Debian: linux-perf, gdb) and permission to trace the child (root, or ptrace_scope 0). The
command must run longer than warm-up + seconds; it is killed at the end.
"""
import argparse
import collections
import os
import re
import signal
import subprocess
import sys
import tempfile
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--warmup", type=float, default=8.0, help="seconds before sampling starts")
    ap.add_argument("--seconds", type=float, default=4.0, help="seconds of sampling")
    ap.add_argument("--top", type=int, default=30, help="hottest instructions listed")
    ap.add_argument("--min-samples", type=int, default=100, help="samples for a code run to be disassembled")
    ap.add_argument("--listing", help="also write every disassembled instruction with its samples to this file")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("no command given (put it after --)")
    for tool in ("perf", "gdb"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            print(f"profile_jit: {tool} not found", file=sys.stderr)
            return 2

    with tempfile.TemporaryDirectory() as tmp:
        child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(a.warmup)
            if child.poll() is not None:
                print("profile_jit: the command ended during the warm-up; make it run longer", file=sys.stderr)
                return 2
            data = os.path.join(tmp, "perf.data")
            subprocess.run(["perf", "record", "-q", "-F", "2000", "-p", str(child.pid), "-o", data, "--", "sleep",
                            str(a.seconds)], check=True, capture_output=True)
            script = subprocess.run(["perf", "script", "-i", data, "-F", "ip"], check=True, capture_output=True,
                                    text=True).stdout
            samples = collections.Counter(int(line, 16) for line in script.split())
            total = sum(samples.values())
            if child.poll() is not None:
                print("profile_jit: the command ended before its code could be read; make it run longer",
                      file=sys.stderr)
                return 2
            # Runs of sampled addresses (gaps under 4 KiB) in user space; the JIT's code is among them.
            runs = []
            for addr in sorted(x for x in samples if x < 1 << 47):
                if runs and addr - runs[-1][1] < 4096:
                    runs[-1][1] = addr
                    runs[-1][2] += samples[addr]
                else:
                    runs.append([addr, addr, samples[addr]])
            hot = [r for r in runs if r[2] >= a.min_samples]
            gdb = ["gdb", "-p", str(child.pid), "-batch"]
            for lo, hi, _ in hot:
                gdb += ["-ex", f"x/{(hi - lo) // 2 + 32}i {lo:#x}"]
            dis = subprocess.run(gdb, capture_output=True, text=True, timeout=300).stdout
        finally:
            if child.poll() is None:
                child.send_signal(signal.SIGKILL)
            child.wait()

    insns = {}
    for line in dis.splitlines():
        m = re.match(r"\s*(?:=>\s*)?(0x[0-9a-f]+)(?:\s+<[^>]*>)?:\s+(.*)", line)
        if m:
            insns[int(m.group(1), 16)] = m.group(2).strip()
    inside = sum(n for addr, n in samples.items() if addr in insns)
    print(f"{total} samples; {sum(r[2] for r in hot)} in {len(hot)} hot code runs, "
          f"{inside} on disassembled instructions")
    for lo, hi, n in hot:
        print(f"  {lo:#x}..{hi:#x}: {100.0 * n / total:5.1f}%")
    print(f"\nhottest instructions (% of all samples; a stall is charged to the instruction after it):")
    for addr, n in sorted(((x, samples[x]) for x in insns if x in samples), key=lambda t: -t[1])[:a.top]:
        print(f"  {100.0 * n / total:5.2f}%  {addr:#x}  {insns[addr]}")
    if a.listing:
        with open(a.listing, "w") as f:
            for addr in sorted(insns):
                f.write(f"{samples.get(addr, 0):6d}  {addr:#x}  {insns[addr]}\n")
    mix = collections.Counter()
    for addr, text in insns.items():
        mix[text.split()[0]] += samples.get(addr, 0)
    print("\ninstruction mix (% of all samples):")
    for op, n in mix.most_common(a.top):
        if n:
            print(f"  {100.0 * n / total:5.2f}%  {op}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
