#!/usr/bin/env python3
"""forge_sum.py FILE OFFSET FMT VALUE: put VALUE (a struct format letter, little-endian: q, i, d,
f, ...) at byte OFFSET of a saelite checkpoint and recompute its trailing 64-bit FNV-1a
(common/fileio.h, file_sum), so that the forged file passes the checksum: what the loaders'
own checks must refuse. Used by the shell tests."""
import struct
import sys

f, off, fmt, val = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
b = bytearray(open(f, 'rb').read())
struct.pack_into('<' + fmt, b, off, float(val) if fmt in 'fde' else int(val))
h = 0xcbf29ce484222325
for x in b[:-8]:
    h = ((h ^ x) * 0x100000001b3) & 0xffffffffffffffff
struct.pack_into('<Q', b, len(b) - 8, h)
open(f, 'wb').write(b)
