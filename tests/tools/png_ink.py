#!/usr/bin/env python3
"""png_ink.py PNG: print the width, height and non-white pixels of an 8-bit
RGB or RGBA PNG without interlace (standard library only), for the Bats
tests that render SVG plots in headless Chromium."""
import struct, sys, zlib
data = open(sys.argv[1], 'rb').read()
assert data[:8] == b'\x89PNG\r\n\x1a\n'
pos, idat, w = 8, b'', 0
while pos < len(data):
    n, typ = struct.unpack('>I4s', data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if typ == b'IHDR':
        w, h, depth, ctype, _, _, lace = struct.unpack('>IIBBBBB', body)
        assert depth == 8 and ctype in (2, 6) and lace == 0, (depth, ctype, lace)
        bpp = 3 if ctype == 2 else 4
    elif typ == b'IDAT':
        idat += body
    pos += 12 + n
raw, stride, prev, ink = zlib.decompress(idat), w * bpp, bytearray(w * bpp), 0
for y in range(h):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    ink += sum(1 for x in range(0, stride, bpp) if line[x:x + 3] != b'\xff\xff\xff')
    prev = line
print(w, h, ink)
