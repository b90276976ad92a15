#!/usr/bin/env python3
"""Offline validator for tests/fixtures/upstream (Python standard library only).

Checks every <name>/oracle/manifest.json: schema, array files exist, size ==
prod(shape) * itemsize, sha256 of the bytes, provenance class, checkpoint file
digests, and every cross-check array equals the upstream array it names
(exact for integers, |a-b| <= atol for f32; rows flagged by `skip_rows` are
not compared). Prints one line per problem and a summary; exit 0 or 1.

Usage: python3 scripts/oracle/check_fixtures.py [tests/fixtures/upstream]
"""
import hashlib
import json
import math
import os
import struct
import sys

SCHEMA = "hebrus-oracle-v1"
PROVENANCE = {"upstream-capture", "independent-cross-check", "contract-control", "derived"}
DTYPES = {"f32": ("f", 4), "i32": ("i", 4), "i64": ("q", 8)}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def values(path, dtype):
    code, size = DTYPES[dtype]
    with open(path, "rb") as f:
        raw = f.read()
    return struct.unpack("<%d%s" % (len(raw) // size, code), raw)


def check_manifest(root, name, problems):
    odir = os.path.join(root, name, "oracle")
    mpath = os.path.join(odir, "manifest.json")
    if not os.path.isfile(mpath):
        problems.append("%s: missing oracle/manifest.json" % name)
        return 0
    with open(mpath) as f:
        doc = json.load(f)
    if doc.get("schema") != SCHEMA:
        problems.append("%s: schema %r" % (name, doc.get("schema")))
    for key in ("producer", "checkpoint", "arrays"):
        if key not in doc:
            problems.append("%s: manifest lacks %s" % (name, key))
    ck = os.path.normpath(os.path.join(odir, doc.get("checkpoint", {}).get("dir", "../checkpoint")))
    listed = doc.get("checkpoint", {}).get("files", {})
    for fn, digest in listed.items():
        p = os.path.join(ck, fn)
        if not os.path.isfile(p):
            problems.append("%s: checkpoint file missing: %s" % (name, fn))
        elif sha256(p) != digest:
            problems.append("%s: checkpoint digest mismatch: %s" % (name, fn))
    if os.path.isdir(ck):
        for fn in sorted(set(os.listdir(ck)) - set(listed)):
            problems.append("%s: checkpoint file not in manifest: %s" % (name, fn))
    for pname, a in doc.get("agreement", {}).items():
        if not a.get("ok", False):
            problems.append("%s: prefill/decode/one-shot agreement failed for %s: %s" % (name, pname, a))
    arrays = {a.get("name"): a for a in doc.get("arrays", [])}
    cache = {}

    def load(a):
        if a["name"] not in cache:
            cache[a["name"]] = values(os.path.join(odir, a["file"]), a["dtype"])
        return cache[a["name"]]

    ok_files = set()
    for a in doc.get("arrays", []):
        n = a.get("name")
        if a.get("provenance") not in PROVENANCE:
            problems.append("%s: %s provenance %r" % (name, n, a.get("provenance")))
        if a.get("dtype") not in DTYPES:
            problems.append("%s: %s dtype %r" % (name, n, a.get("dtype")))
            continue
        p = os.path.join(odir, a.get("file", ""))
        if not os.path.isfile(p):
            problems.append("%s: %s file missing: %s" % (name, n, a.get("file")))
            continue
        want = math.prod(a["shape"]) * DTYPES[a["dtype"]][1]
        if os.path.getsize(p) != want:
            problems.append("%s: %s size %d != %d" % (name, n, os.path.getsize(p), want))
            continue
        if sha256(p) != a.get("sha256"):
            problems.append("%s: %s sha256 mismatch" % (name, n))
            continue
        if a["dtype"] == "f32" and not all(math.isfinite(v) for v in load(a)):
            problems.append("%s: %s has non-finite values" % (name, n))
        ok_files.add(n)
    for a in doc.get("arrays", []):
        ref_name = a.get("checks")
        if ref_name is None:
            continue
        n = a["name"]
        if a.get("provenance") != "independent-cross-check":
            problems.append("%s: %s checks %s but is not an independent-cross-check" % (name, n, ref_name))
        ref = arrays.get(ref_name)
        if ref is None:
            problems.append("%s: %s checks unknown array %s" % (name, n, ref_name))
            continue
        if ref.get("provenance") != "upstream-capture":
            problems.append("%s: %s checks %s which is not an upstream-capture" % (name, n, ref_name))
        if n not in ok_files or ref_name not in ok_files:
            continue
        if ref["shape"] != a["shape"] or ref["dtype"] != a["dtype"]:
            problems.append("%s: %s shape/dtype differs from %s" % (name, n, ref_name))
            continue
        x, y = load(a), load(ref)
        rows = a["shape"][0] if a["shape"] else 1
        width = len(x) // rows if rows else 0
        skip = set()
        if "skip_rows" in a:
            sa = arrays.get(a["skip_rows"]["array"])
            if sa is None or sa["name"] not in ok_files or sa["shape"] != [rows]:
                problems.append("%s: %s skip_rows array unusable" % (name, n))
                continue
            mask = a["skip_rows"]["mask"]
            skip = {r for r, v in enumerate(load(sa)) if int(v) & mask}
        atol = float(a.get("atol", 0.0))
        bad = 0
        for r in range(rows):
            if r in skip:
                continue
            for i in range(r * width, (r + 1) * width):
                d = abs(x[i] - y[i])
                if (a["dtype"] == "f32" and not d <= atol) or (a["dtype"] != "f32" and d != 0):
                    bad += 1
        if bad:
            problems.append("%s: %s disagrees with %s in %d elements" % (name, n, ref_name, bad))
    return len(doc.get("arrays", []))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "tests", "fixtures", "upstream")
    root = os.path.normpath(root)
    problems, total, names = [], 0, []
    if not os.path.isdir(root):
        print("no fixture directory: " + root)
        return 1
    for name in sorted(os.listdir(root)):
        if os.path.isdir(os.path.join(root, name)):
            names.append(name)
            total += check_manifest(root, name, problems)
    for p in problems:
        print("PROBLEM " + p)
    print("check_fixtures: %d fixture sets (%s), %d arrays, %d problems -> %s" % (
        len(names), ", ".join(names), total, len(problems), "OK" if not problems else "FAIL"))
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
