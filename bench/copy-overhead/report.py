#!/usr/bin/env python3
"""Markdown summary of a copy-overhead run, from the trace and hyperfine JSON files.

usage: report.py OUT_DIR SIZE_MIB ROW...   (reads OUT_DIR/ROW.{send,recv,hyperfine}.json)
"""
import json
import os
import sys

DESCR = {
    "dd0": ("dd if=/dev/zero bs=1M | nc", "nc -l > /dev/null"),
    "ddf": ("dd if=FILE bs=1M | nc", "nc -l > /dev/null"),
    "nc": ("nc < FILE", "nc -l > /dev/null"),
    "sluice": ("sluice send FILE", "sluice recv --sink null"),
    "ddsl": ("dd if=FILE bs=1M | sluice send -", "sluice recv --stdout > /dev/null"),
}


def load(path):
    with open(path) as f:
        return json.load(f)


def mib(b):
    return f"{b / (1 << 20):.1f}"


def main():
    out, size_mib, rows = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    size = size_mib << 20
    print(f"# copy-overhead: {size_mib} MiB over 127.0.0.1\n")
    print("| row | sender | receiver | GB/s (hyperfine mean) | sender copies/B | receiver copies/B "
          "| sender CPU s/GB | receiver CPU s/GB |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        hf = load(os.path.join(out, f"{row}.hyperfine.json"))["results"][0]
        tx, rx = (load(os.path.join(out, f"{row}.{side}.json")) for side in ("send", "recv"))
        gbps = size / hf["mean"] / 1e9
        s, r = tx["summary"], rx["summary"]
        print(f"| {row} | `{DESCR[row][0]}` | `{DESCR[row][1]}` | {gbps:.2f} (min {size / hf['max'] / 1e9:.2f}, "
              f"max {size / hf['min'] / 1e9:.2f}) | {s['copies_per_byte']:.2f} | {r['copies_per_byte']:.2f} | "
              f"{s['cpu_s_per_gb']:.3f} | {r['cpu_s_per_gb']:.3f} |")
    print("\nPer stage (MiB; copies are user<->kernel; kernel copy is inside zero-copy; "
          "no data = /dev/null writes and /dev/zero reads, not copies):\n")
    print("| row | side | pid | comm | copied k->u | copied u->k | zero-copy | kernel copy | no data "
          "| syscalls | ctx switches | on-CPU s | main flows |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        for side in ("send", "recv"):
            rep = load(os.path.join(out, f"{row}.{side}.json"))
            for st in rep["stages"]:
                if st["copied_bytes"] + st["zero_copy_bytes"] + st["no_data_bytes"] < size // 100:
                    continue  # the shell wrapper and the like
                flows = "; ".join(f"{f['op']} {f['from']}->{f['to']} {mib(f['bytes'])} ({f['kind']})"
                                  for f in st["flows"] if f["bytes"] >= size // 100)
                cs = st["context_switches"]
                print(f"| {row} | {side} | {st['pid']} | {st['comm']} | {mib(st['copied_in_bytes'])} | "
                      f"{mib(st['copied_out_bytes'])} | {mib(st['zero_copy_bytes'])} | {mib(st['kernel_copy_bytes'])} | "
                      f"{mib(st['no_data_bytes'])} | {st['syscalls']} | {cs['voluntary'] + cs['involuntary']} | "
                      f"{st['cpu_ns'] / 1e9:.3f} | {flows} |")
    any_rep = load(os.path.join(out, f"{rows[0]}.send.json"))
    print(f"\nMethod: probe variant `{any_rep['summary']['method']}`; "
          f"fd classes {any_rep['methods']['fd_class']}; CPU: {any_rep['methods']['cpu_ns']}.")


if __name__ == "__main__":
    main()
