#!/usr/bin/env python3
"""Sums a VKSPEC_PIPELINE_LOG file per test case: the pipelines each case is the first to create
(on a cold run, each is a driver compile) and the case's time. Usage:
  VKSPEC_PIPELINE_LOG=/tmp/p.log build/vkspec_tests ...; tools/pipeline_log.py /tmp/p.log [TOP]
Lines: "ms<TAB>shader<TAB>spec" per pipeline (src/pipeline.cpp), "#case|#end<TAB>seconds<TAB>name"
per test case (tests/main.cpp)."""
import collections
import sys


def main():
    path, top = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 30
    seen, new, ms = set(), collections.Counter(), collections.Counter()
    dur, per_shader = collections.Counter(), collections.Counter()
    case, start = "(outside a test case)", None
    for line in open(path, encoding="utf-8", errors="replace"):
        f = line.rstrip("\n").split("\t")
        if f[0] == "#case":
            case, start = f[2], float(f[1])
        elif f[0] == "#end" and start is not None:
            dur[case] += float(f[1]) - start
        elif len(f) >= 3:
            ms[case] += float(f[0])
            key = (f[1], f[2])
            if key not in seen:
                seen.add(key)
                new[case] += 1
                per_shader[f[1]] += 1
    print(f"{len(seen)} distinct pipelines; {sum(ms.values()) / 1000:.0f} s creating them; "
          f"{sum(dur.values()):.0f} s in test cases")
    print("  new  create s  case s  case")
    for c in sorted(set(dur) | set(new), key=lambda c: (-new[c], -dur[c]))[:top]:
        print(f"{new[c]:5d} {ms[c] / 1000:9.1f} {dur[c]:7.1f}  {c}")
    print("variants per shader:")
    for s, n in per_shader.most_common(top):
        print(f"{n:5d}  {s}")


if __name__ == "__main__":
    main()
