#!/usr/bin/env python3
"""Write the corrupt (and a few valid) safetensors inputs of the reader's corpus.

Usage: scripts/make-corrupt-safetensors.py [OUTDIR]
(default tests/fixtures/corrupt/safetensors relative to the repository root)

Every case is built here byte by byte with the standard library only, so the
corpus is reproducible anywhere.  OUTDIR receives one .safetensors file per
single-file case, one directory per checkpoint-level case, expected.tsv
(relative path, expected diagnostic id or "ok", a substring of the expected
field path) and README.md.  Re-running replaces what an earlier run wrote.
"""
import json
import os
import shutil
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    ROOT, "tests", "fixtures", "corrupt", "safetensors")

cases = []  # (relative path, expected id, field substring, why)


def clean():
    """Remove what an earlier run wrote (and nothing else)."""
    if not os.path.isdir(OUT):
        return
    for name in os.listdir(OUT):
        p = os.path.join(OUT, name)
        if name.endswith(".safetensors") or (name.startswith("ck-") and os.path.isdir(p)):
            shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)


clean()


def data(n):
    """n deterministic payload bytes."""
    return bytes((i * 7 + 3) & 0xFF for i in range(n))


def file_bytes(header, payload=b"", pad=True, length=None):
    """8-byte LE length + header (+ spaces to a multiple of 8) + payload."""
    if isinstance(header, (dict, list)):
        header = json.dumps(header, separators=(",", ":"))
    if isinstance(header, str):
        header = header.encode("utf-8")
    if pad:
        header += b" " * ((8 - len(header) % 8) % 8)
    n = len(header) if length is None else length
    return struct.pack("<Q", n) + header + payload


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def write(rel, content):
    path = os.path.join(OUT, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(content)


def single(name, expect, field, why, content):
    rel = name + ".safetensors"
    write(rel, content)
    cases.append((rel, expect, field, why))


def W(name, field=""):
    """The field path of tensor w in file name (or of the given field)."""
    return "%s.safetensors:tensors[w]%s" % (name, "." + field if field else "")


def simple(name, expect, field, why, ent, payload_len=None, extra=None):
    hdr = {"w": ent}
    if extra:
        hdr.update(extra)
    n = payload_len if payload_len is not None else 8
    single(name, expect, field, why, file_bytes(hdr, data(n)))


F32x2 = entry("F32", [2], 0, 8)

# ---------------------------------------------------------------- valid
single("valid-metadata", "ok", "", "two tensors and a __metadata__ map",
       file_bytes({"__metadata__": {"format": "pt", "note": "caf\u00e9"},
                   "b": entry("BF16", [2, 2], 8, 16), "a": F32x2}, data(16)))
single("valid-empty", "ok", "", "no tensor at all, no data bytes",
       file_bytes({}, b""))
single("valid-padded", "ok", "", "header followed by 61 spaces of padding",
       file_bytes(b'{"w":' + json.dumps(F32x2).encode() + b"}" + b" " * 61, data(8), pad=False))
single("valid-scalar-and-empty", "ok", "", "a 0-d scalar, a zero-size tensor, header order differs from data order",
       file_bytes({"z": entry("F16", [0, 5], 4, 4), "s": entry("I32", [], 0, 4),
                   "u": entry("U8", [3], 4, 7)}, data(7)))

# ------------------------------------------------------- header framing
single("file-short", "st-file-short", "file-short.safetensors:header_length",
       "7 bytes, shorter than the length field", b"\x02\x00\x00\x00\x00\x00\x00")
single("header-size-limit", "st-header-size-limit", "header-size-limit.safetensors:header_length",
       "header length 100,000,001", file_bytes({}, length=100000001))
single("header-length-max", "st-header-size-limit", "header-length-max.safetensors:header_length",
       "header length 2^64-1", file_bytes({}, length=2**64 - 1))
single("header-truncated", "st-header-truncated", "header-truncated.safetensors:header_length",
       "header length 64 with 8 header bytes present", file_bytes({}, length=64))
single("header-nul", "st-header-nul", "header-nul.safetensors:header",
       "a raw NUL byte inside the header", file_bytes(b'{"w\x00":{}}'))
single("header-nul-escape", "st-header-nul", "header-nul-escape.safetensors:header",
       "a \\u0000 escape in a tensor name", file_bytes(b'{"a\\u0000b":{}}'))
single("header-utf8", "st-header-utf8", "header-utf8.safetensors:header",
       "byte 0xff in a tensor name", file_bytes(b'{"w\xff":{}}'))
single("header-utf8-overlong", "st-header-utf8", "header-utf8-overlong.safetensors:header",
       "overlong encoding C0 AF of '/'", file_bytes(b'{"w\xc0\xaf":{}}'))
single("header-utf8-surrogate", "st-header-utf8", "header-utf8-surrogate.safetensors:__metadata__",
       "a lone \\ud800 escape in a metadata value",
       file_bytes(b'{"__metadata__":{"k":"\\ud800"}}'))
single("header-not-object", "st-header-not-object", "header-not-object.safetensors:header_length",
       "the header is a JSON array", file_bytes(b"[]"))
single("header-leading-space", "st-header-not-object", "header-leading-space.safetensors:header_length",
       "white space before '{'", file_bytes(b" {}"))
single("header-empty", "st-header-not-object", "header-empty.safetensors:header_length",
       "header length 0", struct.pack("<Q", 0))
single("header-json", "st-header-json", "header-json.safetensors:tensors[w].dtype",
       "a trailing comma inside an entry", file_bytes(b'{"w":{"dtype":"F32",}}'))
single("header-json-unterminated", "st-header-json", "header-json-unterminated.safetensors",
       "the object never closes", file_bytes(b'{"w":{"dtype":"F32"'))
single("header-json-deep", "st-header-json", "header-json-deep.safetensors:tensors[w]",
       "arrays nested 20 deep", file_bytes(b'{"w":{"shape":' + b"[" * 20 + b"]" * 20 + b"}}"))
single("header-trailing", "st-header-trailing", "header-trailing.safetensors:header",
       "a second value after the object", file_bytes(b"{} {}"))
single("header-trailing-newline", "st-header-trailing", "header-trailing-newline.safetensors:header",
       "a newline after the object (only spaces pad)", file_bytes(b"{}\n", pad=False))

# --------------------------------------------------------------- numbers
single("number-fraction", "st-number-not-integer", W("number-fraction", "shape"),
       "shape [2.0]", file_bytes(b'{"w":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}}', data(8)))
single("number-exponent", "st-number-not-integer", W("number-exponent", "data_offsets"),
       "end written 8e0", file_bytes(b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8e0]}}', data(8)))
single("number-negative-zero", "st-number-not-integer", W("number-negative-zero", "data_offsets"),
       "begin written -0", file_bytes(b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[-0,8]}}', data(8)))
single("number-range", "st-number-range", W("number-range", "data_offsets"),
       "end 2^64-1", file_bytes(b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551615]}}', data(8)))
single("number-range-2p53", "st-number-range", W("number-range-2p53", "shape"),
       "a dimension 2^53+1, which a double cannot hold",
       file_bytes(b'{"w":{"dtype":"U8","shape":[9007199254740993],"data_offsets":[0,8]}}', data(8)))

# -------------------------------------------------------------- metadata
simple("metadata-not-object", "st-metadata-invalid", "metadata-not-object.safetensors:__metadata__",
       "__metadata__ is a string", F32x2, extra={"__metadata__": "x"})
simple("metadata-null", "st-metadata-invalid", "metadata-null.safetensors:__metadata__",
       "__metadata__ is null (the reference reads it as absent)", F32x2, extra={"__metadata__": None})
simple("metadata-value", "st-metadata-invalid", "metadata-value.safetensors:__metadata__[k]",
       "a metadata value that is a number", F32x2, extra={"__metadata__": {"k": 1}})
single("metadata-duplicate-key", "st-metadata-invalid", "metadata-duplicate-key.safetensors:__metadata__[k]",
       "key k twice", file_bytes(b'{"__metadata__":{"k":"a","k":"b"},"w":' + json.dumps(F32x2).encode() + b"}", data(8)))
single("metadata-twice", "st-metadata-invalid", "metadata-twice.safetensors",
       "two __metadata__ members", file_bytes(b'{"__metadata__":{},"__metadata__":{}}'))

# ------------------------------------------------------- names, entries
single("tensor-name-empty", "st-tensor-name-invalid", "tensor-name-empty.safetensors:tensors[]",
       "the empty tensor name", file_bytes({"": F32x2}, data(8)))
single("tensor-name-long", "st-tensor-name-invalid", "tensor-name-long.safetensors:tensors[aaaa",
       "a 513-byte tensor name", file_bytes({"a" * 513: F32x2}, data(8)))
single("duplicate-tensor", "st-duplicate-tensor", W("duplicate-tensor"),
       "tensor w defined twice (cJSON and the reference would keep one)",
       file_bytes(b'{"w":' + json.dumps(entry("F32", [2], 0, 8)).encode() +
                  b',"w":' + json.dumps(entry("F32", [2], 8, 16)).encode() + b"}", data(16)))
simple("entry-not-object", "st-entry-not-object", W("entry-not-object"), "entry is an array", [1])
simple("entry-missing-dtype", "st-entry-missing-field", W("entry-missing-dtype", "dtype"),
       "no dtype", {"shape": [2], "data_offsets": [0, 8]})
simple("entry-missing-offsets", "st-entry-missing-field", W("entry-missing-offsets", "data_offsets"),
       "no data_offsets", {"dtype": "F32", "shape": [2]})
simple("entry-unknown-field", "st-entry-unknown-field", W("entry-unknown-field", "offsets"),
       "an extra field 'offsets'", dict(F32x2, offsets=[0, 8]))
single("entry-duplicate-field", "st-entry-duplicate-field", W("entry-duplicate-field", "dtype"),
       "dtype twice", file_bytes(b'{"w":{"dtype":"F32","dtype":"I32","shape":[2],"data_offsets":[0,8]}}', data(8)))

# ----------------------------------------------------- dtype and shape
simple("dtype-unknown", "st-dtype-unknown", W("dtype-unknown", "dtype"), "dtype F33", entry("F33", [2], 0, 8))
simple("dtype-lowercase", "st-dtype-unknown", W("dtype-lowercase", "dtype"), "dtype f32", entry("f32", [2], 0, 8))
simple("dtype-subbyte", "st-dtype-unknown", W("dtype-subbyte", "dtype"),
       "dtype F4 (sub-byte, not accepted)", entry("F4", [16], 0, 8))
simple("dtype-not-string", "st-dtype-unknown", W("dtype-not-string", "dtype"), "dtype 4", entry(4, [2], 0, 8))
simple("shape-not-array", "st-shape-invalid", W("shape-not-array", "shape"), "shape \"2\"", entry("F32", "2", 0, 8))
simple("shape-negative", "st-shape-invalid", W("shape-negative", "shape"), "shape [-2]", entry("F32", [-2], 0, 8))
simple("shape-nested", "st-shape-invalid", W("shape-nested", "shape"), "shape [[2]]", entry("F32", [[2]], 0, 8))
simple("shape-too-many-dims", "st-shape-invalid", W("shape-too-many-dims", "shape"),
       "nine dimensions", entry("U8", [1] * 8 + [8], 0, 8))
simple("shape-overflow", "st-shape-overflow", W("shape-overflow", "shape"),
       "[2^32, 2^32]: the element count overflows", entry("U8", [2**32, 2**32], 0, 8))
simple("shape-overflow-bytes", "st-shape-overflow", W("shape-overflow-bytes", "shape"),
       "[2^31, 2^31] F32: the byte count overflows", entry("F32", [2**31, 2**31], 0, 8))

# --------------------------------------------------------------- offsets
simple("offsets-short", "st-offsets-invalid", W("offsets-short", "data_offsets"), "[0]",
       {"dtype": "F32", "shape": [2], "data_offsets": [0]})
simple("offsets-three", "st-offsets-invalid", W("offsets-three", "data_offsets"), "[0, 8, 8]",
       {"dtype": "F32", "shape": [2], "data_offsets": [0, 8, 8]})
simple("offsets-negative", "st-offsets-invalid", W("offsets-negative", "data_offsets"), "[-8, 0]",
       entry("F32", [2], -8, 0))
simple("offsets-string", "st-offsets-invalid", W("offsets-string", "data_offsets"), "\"0,8\"",
       {"dtype": "F32", "shape": [2], "data_offsets": "0,8"})
simple("offsets-reversed", "st-offsets-reversed", W("offsets-reversed", "data_offsets"), "[8, 0]",
       entry("F32", [2], 8, 0))
simple("offsets-mismatch", "st-offsets-mismatch", W("offsets-mismatch", "data_offsets"),
       "F32 [2] over 4 bytes", entry("F32", [2], 0, 4), payload_len=4)
simple("offsets-gap-start", "st-offsets-gap", W("offsets-gap-start", "data_offsets"),
       "the only tensor starts at 4", entry("F32", [1], 4, 8))
single("offsets-gap-between", "st-offsets-gap", "offsets-gap-between.safetensors:tensors[b].data_offsets",
       "4 unowned bytes between a and b",
       file_bytes({"a": entry("F32", [1], 0, 4), "b": entry("F32", [1], 8, 12)}, data(12)))
single("offsets-overlap", "st-offsets-overlap", "offsets-overlap.safetensors:tensors[b].data_offsets",
       "b starts inside a",
       file_bytes({"a": entry("F32", [2], 0, 8), "b": entry("F32", [2], 4, 12)}, data(12)))
single("offsets-overlap-empty", "st-offsets-overlap", "offsets-overlap-empty.safetensors:tensors[z].data_offsets",
       "a zero-size tensor placed inside another",
       file_bytes({"a": entry("F32", [2], 0, 8), "z": entry("F32", [0], 4, 4)}, data(8)))
simple("buffer-trailing", "st-buffer-trailing", "buffer-trailing.safetensors",
       "two data bytes after the last tensor", F32x2, payload_len=10)
simple("buffer-short", "st-buffer-short", "buffer-short.safetensors",
       "the data section ends 4 bytes early", F32x2, payload_len=4)


# ------------------------------------------------------------ checkpoints
def shard(tensors):
    """A valid shard holding F32 [2] tensors of the given names."""
    hdr, off = {}, 0
    for name in tensors:
        hdr[name] = entry("F32", [2], off, off + 8)
        off += 8
    return file_bytes(hdr, data(off))


def index(weight_map, total=None, extra=None):
    doc = {"metadata": {"total_size": total} if total is not None else {},
           "weight_map": weight_map}
    if extra:
        doc.update(extra)
    return json.dumps(doc, indent=2).encode() + b"\n"


def ckdir(name, expect, field, why, files):
    for fname, content in files.items():
        write(os.path.join(name, fname), content)
    cases.append((name, expect, field, why))


S1, S2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
IDX = "model.safetensors.index.json"
good_map = {"a": S1, "b": S1, "c": S2}

ckdir("ck-valid-index", "ok", "", "two shards that agree with their index",
      {S1: shard(["a", "b"]), S2: shard(["c"]), IDX: index(good_map, 24)})
ckdir("ck-valid-noindex", "ok", "", "two shards, no index: both are read",
      {"x.safetensors": shard(["a"]), "y.safetensors": shard(["b"])})
ckdir("ck-no-shards", "ck-no-shards", "ck-no-shards", "a directory with config.json only",
      {"config.json": b"{}\n"})
ckdir("ck-index-invalid", "ck-index-invalid", IDX, "the index is not JSON",
      {S1: shard(["a"]), IDX: b"{not json\n"})
ckdir("ck-index-path", "ck-index-invalid", IDX + ":weight_map[a]", "a shard name with a directory part",
      {S1: shard(["a"]), IDX: index({"a": "../" + S1})})
ckdir("ck-index-unknown-key", "ck-index-invalid", IDX + ":extra", "a top-level key other than metadata and weight_map",
      {S1: shard(["a"]), IDX: index({"a": S1}, extra={"extra": {}})})
ckdir("ck-index-mapped-twice", "ck-index-invalid", IDX + ":weight_map[a]", "tensor a mapped twice",
      {S1: shard(["a"]), IDX: ('{"weight_map":{"a":"%s","a":"%s"}}\n' % (S1, S1)).encode()})
ckdir("ck-index-missing-shard", "ck-index-missing-shard", IDX + ":weight_map",
      "the index names a second shard that is absent",
      {S1: shard(["a", "b"]), IDX: index(good_map)})
ckdir("ck-index-missing-tensor", "ck-index-missing-tensor", IDX + ":weight_map[d]",
      "the index maps d, which no shard holds",
      {S1: shard(["a", "b"]), S2: shard(["c"]), IDX: index(dict(good_map, d=S2))})
ckdir("ck-index-unmapped-tensor", "ck-index-unmapped-tensor", S2 + ":tensors[d]",
      "shard 2 holds d, which the index does not map",
      {S1: shard(["a", "b"]), S2: shard(["c", "d"]), IDX: index(good_map)})
ckdir("ck-index-wrong-shard", "ck-index-wrong-shard", IDX + ":weight_map[c]",
      "c is mapped to shard 1 but held by shard 2",
      {S1: shard(["a", "b"]), S2: shard(["c", "d"]),
       IDX: index({"a": S1, "b": S1, "c": S1, "d": S2})})
ckdir("ck-index-total-size", "ck-index-total-size", IDX + ":metadata.total_size",
      "total_size 25, the tensors hold 24 bytes",
      {S1: shard(["a", "b"]), S2: shard(["c"]), IDX: index(good_map, 25)})
ckdir("ck-stray-shard", "ck-stray-shard", "stray.safetensors", "a shard file the index does not name",
      {S1: shard(["a", "b"]), S2: shard(["c"]), "stray.safetensors": shard(["s"]),
       IDX: index(good_map, 24)})
ckdir("ck-duplicate-tensor", "ck-duplicate-tensor", "y.safetensors:tensors[a]",
      "tensor a in x.safetensors and in y.safetensors, no index",
      {"x.safetensors": shard(["a"]), "y.safetensors": shard(["a", "b"])})
ckdir("ck-duplicate-tensor-index", "ck-duplicate-tensor", S2 + ":tensors[a]",
      "tensor a in both shards, the index maps it to one",
      {S1: shard(["a", "b"]), S2: shard(["a", "c"]), IDX: index(good_map)})
ckdir("ck-bad-shard", "st-offsets-gap", S2 + ":tensors[c].data_offsets",
      "a shard's own st-* diagnostic passes through the checkpoint reader",
      {S1: shard(["a", "b"]), S2: file_bytes({"c": entry("F32", [1], 4, 8)}, data(8)),
       IDX: index(good_map)})

# ------------------------------------------------------------------ write
README = """# Corrupt safetensors corpus

Inputs that the safetensors reader (libstore/checkpoint/hb_safetensors.c) and the
checkpoint-directory reader (libstore/checkpoint/hb_st_checkpoint.c) must refuse, each
with one intended diagnostic id, plus a few valid inputs that must open.

How they were made: every file here is written byte by byte by
`scripts/make-corrupt-safetensors.py` (Python standard library only); run it
from the repository root to regenerate this directory, README.md and
expected.tsv included.  Nothing here was produced by, or captured from, the
upstream `safetensors` implementation.

Provenance class: **contract-control**.  The expected ids and field paths are
this project's contract (the X-macro table HB_ST_DIAG_LIST in
libstore/checkpoint/hb_safetensors.h), not upstream captures.  Where the reader is
stricter than the reference implementation (e.g. duplicate tensor names,
unknown entry fields, `__metadata__: null`, trailing newline padding, integers
above 2^53, sub-byte dtypes), the case says so.

expected.tsv columns: relative path (a `.safetensors` file, or a directory
opened as a checkpoint), expected diagnostic id (`ok` = must open), a
substring the error's field path must contain, and what the case is.
tests/unit/test_store_safetensors.c walks it.
"""

def main():
    with open(os.path.join(OUT, "expected.tsv"), "w") as f:
        f.write("# path\texpected-id\tfield-substring\twhy\n")
        for rel, expect, field, why in cases:
            f.write("%s\t%s\t%s\t%s\n" % (rel, expect, field, why))
    with open(os.path.join(OUT, "README.md"), "w") as f:
        f.write(README)
    print("%d cases written to %s" % (len(cases), OUT))


if __name__ == "__main__":
    main()
