#!/usr/bin/env python3
"""Offline validator for tests/fixtures/upstream (Python standard library only).

What it enforces, in order (each failure is one PROBLEM line naming the file
or the array; exit 0 only when there is none):

1. Digest pin: every file listed in tests/fixtures/MANIFESTS.sha256 (every
   oracle manifest.json, the rule table, the chat / tokenizer / codec oracle
   files) has the recorded sha256, and every upstream manifest and the rule
   table are listed.  A hand-edited manifest fails here even when its arrays
   are consistent with it.
2. Per set: schema, checkpoint file digests (and no unlisted file), the
   prefill/decode/one-shot agreement record, every array file present with
   prod(shape) * itemsize bytes and the manifest's sha256, no .bin file the
   manifest does not list, f32 values finite.
3. Provenance (AFN-014): every array's label is the one the first matching
   rule of upstream/PROVENANCE.rules requires; an array no rule matches is
   refused.  An independent-cross-check must name (`checks`) the
   upstream-capture it re-derives, and be that array's xc/ twin; only
   cross-checks may name one.  A set derived from another (converter inputs)
   carries no upstream-capture; an oracle set carries some.
4. Cross-checks: every independent-cross-check equals the array it checks
   (exact for integers, |a-b| <= atol for f32); rows flagged by `skip_rows`
   are not compared, their number must equal the tie count the capture
   recorded in `stats`, and at least one row is always compared.
5. Derived arrays are re-derived here from the sources they claim (argmaxes
   of the captured logits, the prompt + fed ids, (pos+1)//ratio, the tie
   bits from the captured scores, the fp8 dequantisation from the committed
   checkpoint); a derived array with no re-derivation is refused.

Usage: python3 scripts/oracle/check_fixtures.py [--pins FILE] [tests/fixtures/upstream]
(--pins defaults to MANIFESTS.sha256 in the directory above the upstream one;
its paths are relative to that directory.)
"""
import fnmatch
import hashlib
import json
import math
import os
import re
import struct
import sys

SCHEMA = "hebrus-oracle-v1"
UP, XC, CC, DV = "upstream-capture", "independent-cross-check", "contract-control", "derived"
PROVENANCE = (UP, XC, CC, DV)
DTYPES = {"f32": ("f", 4), "i32": ("i", 4), "i64": ("q", 8)}
RULES_NAME = "PROVENANCE.rules"
PINS_NAME = "MANIFESTS.sha256"
# Only `*` and `[a-b]` ranges: the subset on which Python's fnmatch and C's
# fnmatch(3) (tests/unit/test_fixtures.c reads the same table) agree.
PATTERN_OK = re.compile(r"^(?:[A-Za-z0-9_/.*-]|\[[0-9a-z]-[0-9a-z]\])+$")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def no_duplicate_keys(pairs):
    # json keeps the last of two equal keys and cJSON the first: a manifest
    # with `"provenance"` twice would read differently to the two checkers.
    keys = [k for k, _ in pairs]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise ValueError("duplicate key(s) " + ", ".join(dup))
    return dict(pairs)


def load_json(path):
    with open(path, "rb") as f:
        return json.loads(f.read().decode("utf-8"), object_pairs_hook=no_duplicate_keys)


def values(path, dtype):
    code, size = DTYPES[dtype]
    with open(path, "rb") as f:
        raw = f.read()
    return struct.unpack("<%d%s" % (len(raw) // size, code), raw)


def first_argmax(row):
    best = 0
    for i in range(1, len(row)):
        if row[i] > row[best]:
            best = i
    return best


def parse_rules(path, problems):
    rules = []
    if not os.path.isfile(path):
        problems.append("%s: missing (the provenance rule table)" % RULES_NAME)
        return rules
    seen = set()
    with open(path, encoding="utf-8") as f:
        for ln, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2 or parts[1] not in PROVENANCE or not PATTERN_OK.match(parts[0]):
                problems.append("%s:%d: not 'PATTERN LABEL' with a known label and a plain glob" % (RULES_NAME, ln))
                continue
            if parts[0] in seen:
                problems.append("%s:%d: pattern %s repeated" % (RULES_NAME, ln, parts[0]))
            seen.add(parts[0])
            rules.append((parts[0], parts[1], ln))
    if not rules:
        problems.append("%s: no rules" % RULES_NAME)
    return rules


def rule_for(name, rules):
    for pat, label, ln in rules:
        if fnmatch.fnmatchcase(name, pat):
            return pat, label, ln
    return None


def check_pins(fixtures, pins, upstream_root, problems):
    """The digest pin.  Returns the number of files it pins."""
    if not os.path.isfile(pins):
        problems.append("%s: missing (the manifest digest pin)" % pins)
        return 0
    listed = {}
    with open(pins, encoding="utf-8") as f:
        for ln, line in enumerate(f, 1):
            m = re.match(r"^([0-9a-f]{64})  ([^\s].*)$", line.rstrip("\n"))
            if not m or m.group(2).startswith("/") or ".." in m.group(2).split("/"):
                problems.append("%s:%d: not '<sha256>  <relative path>'" % (PINS_NAME, ln))
                continue
            if m.group(2) in listed:
                problems.append("%s:%d: %s pinned twice" % (PINS_NAME, ln, m.group(2)))
            listed[m.group(2)] = m.group(1)
    for rel, digest in sorted(listed.items()):
        p = os.path.join(fixtures, rel)
        if not os.path.isfile(p):
            problems.append("%s: pinned in %s but missing" % (rel, PINS_NAME))
        elif sha256(p) != digest:
            problems.append("%s: sha256 %s differs from the pin in %s (edited by hand? re-pin only a reviewed change)"
                            % (rel, sha256(p), PINS_NAME))
    up = os.path.relpath(upstream_root, fixtures)
    need = [os.path.join(up, RULES_NAME)]
    for name in sorted(os.listdir(upstream_root)):
        if os.path.isfile(os.path.join(upstream_root, name, "oracle", "manifest.json")):
            need.append(os.path.join(up, name, "oracle", "manifest.json"))
    for rel in need:
        if os.path.normpath(rel) not in {os.path.normpath(k) for k in listed}:
            problems.append("%s: not pinned in %s" % (rel, PINS_NAME))
    return len(listed)


class Tally:
    def __init__(self):
        self.arrays = 0
        self.by_label = {k: 0 for k in PROVENANCE}
        self.xc_arrays = 0
        self.xc_elems = 0
        self.xc_skipped_rows = 0
        self.derived = 0


class FixtureSet:
    def __init__(self, root, name, rules, problems, tally):
        self.root, self.name, self.rules, self.problems, self.tally = root, name, rules, problems, tally
        self.odir = os.path.join(root, name, "oracle")
        self.cache = {}
        self.ok = set()  # arrays whose bytes match their manifest entry

    def bad(self, what, msg):
        self.problems.append("%s: %s: %s" % (self.name, what, msg))

    def load(self, n):
        if n not in self.cache:
            a = self.arrays[n]
            self.cache[n] = values(os.path.join(self.odir, a["file"]), a["dtype"])
        return self.cache[n]

    def rows(self, n):
        a = self.arrays[n]
        x = self.load(n)
        r = a["shape"][0] if a["shape"] else 1
        w = len(x) // r if r else 0
        return [x[i * w:(i + 1) * w] for i in range(r)]

    def check(self):
        mpath = os.path.join(self.odir, "manifest.json")
        if not os.path.isfile(mpath):
            self.bad("oracle/manifest.json", "missing")
            return
        try:
            doc = load_json(mpath)
        except ValueError as e:
            self.bad("oracle/manifest.json", "unreadable: %s" % e)
            return
        self.doc = doc
        if doc.get("schema") != SCHEMA:
            self.bad("manifest", "schema %r" % doc.get("schema"))
        for key in ("producer", "checkpoint", "arrays"):
            if key not in doc:
                self.bad("manifest", "lacks " + key)
        self.check_checkpoint()
        for pname, a in doc.get("agreement", {}).items():
            if not a.get("ok", False):
                self.bad(pname, "prefill/decode/one-shot agreement failed: %s" % a)
        entries = doc.get("arrays", [])
        self.arrays = {}
        for a in entries:
            if a.get("name") in self.arrays:
                self.bad(str(a.get("name")), "listed twice")
            self.arrays[a.get("name")] = a
        self.tally.arrays += len(entries)
        for a in entries:
            self.check_bytes(a)
            self.check_label(a)
        self.check_orphans(entries)
        labels = [a.get("provenance") for a in entries]
        if "derived_from" in doc:
            if UP in labels:
                self.bad("manifest", "derived from %s yet claims an upstream-capture" % doc["derived_from"])
        elif UP not in labels:
            self.bad("manifest", "an oracle set with no upstream-capture")
        for a in entries:
            if a.get("provenance") == XC or "checks" in a:
                self.check_xc(a)
        self.check_derived()

    def check_checkpoint(self):
        ck_doc = self.doc.get("checkpoint", {})
        ck = os.path.normpath(os.path.join(self.odir, ck_doc.get("dir", "../checkpoint")))
        listed = ck_doc.get("files", {})
        for fn, digest in listed.items():
            p = os.path.join(ck, fn)
            if not os.path.isfile(p):
                self.bad("checkpoint/" + fn, "missing")
            elif sha256(p) != digest:
                self.bad("checkpoint/" + fn, "sha256 differs from the manifest")
        if os.path.isdir(ck):
            for fn in sorted(set(os.listdir(ck)) - set(listed)):
                self.bad("checkpoint/" + fn, "not in the manifest")

    def check_bytes(self, a):
        n = a.get("name")
        if a.get("dtype") not in DTYPES:
            self.bad(n, "dtype %r" % a.get("dtype"))
            return
        if a.get("file") != str(n).replace("/", ".") + ".bin":
            self.bad(n, "file %r is not the name with / -> . plus .bin" % a.get("file"))
            return
        p = os.path.join(self.odir, a["file"])
        if not os.path.isfile(p):
            self.bad(n, "file missing: %s" % a["file"])
            return
        want = math.prod(a["shape"]) * DTYPES[a["dtype"]][1]
        if os.path.getsize(p) != want:
            self.bad(n, "%s has %d bytes, shape says %d" % (a["file"], os.path.getsize(p), want))
            return
        if sha256(p) != a.get("sha256"):
            self.bad(n, "%s sha256 differs from the manifest (the .bin was edited)" % a["file"])
            return
        if a["dtype"] == "f32" and not all(math.isfinite(v) for v in self.load(n)):
            self.bad(n, "non-finite values")
            return
        self.ok.add(n)

    def check_label(self, a):
        n, prov = a.get("name"), a.get("provenance")
        self.tally.by_label[prov] = self.tally.by_label.get(prov, 0) + 1
        if prov not in PROVENANCE:
            self.bad(n, "unknown provenance %r" % prov)
        r = rule_for(str(n), self.rules)
        if r is None:
            self.bad(n, "no rule in %s matches this name (add one before adding such an array)" % RULES_NAME)
        elif r[1] != prov:
            self.bad(n, "labelled %r, but rule '%s' (%s:%d) requires %r" % (prov, r[0], RULES_NAME, r[2], r[1]))

    def check_orphans(self, entries):
        files = {a.get("file") for a in entries} | {"manifest.json"}
        for fn in sorted(set(os.listdir(self.odir)) - files):
            self.bad("oracle/" + fn, "file not listed in the manifest")

    def check_xc(self, a):
        n, ref_name = a["name"], a.get("checks")
        if a.get("provenance") != XC:
            self.bad(n, "names an array it checks (%s) but is labelled %r" % (ref_name, a.get("provenance")))
            return
        if ref_name is None:
            self.bad(n, "an independent-cross-check that names no array it checks (checks nothing)")
            return
        if n.replace("/xc/", "/", 1) != ref_name:
            self.bad(n, "checks %s, which is not its xc/ twin %s" % (ref_name, n.replace("/xc/", "/", 1)))
            return
        ref = self.arrays.get(ref_name)
        if ref is None:
            self.bad(n, "checks unknown array %s" % ref_name)
            return
        if ref.get("provenance") != UP:
            self.bad(n, "checks %s, which is not an upstream-capture" % ref_name)
        if n not in self.ok or ref_name not in self.ok:
            return  # the byte problem is already reported
        if ref["shape"] != a["shape"] or ref["dtype"] != a["dtype"]:
            self.bad(n, "shape/dtype differs from %s" % ref_name)
            return
        atol = a.get("atol", 0.0)
        if not isinstance(atol, (int, float)) or not math.isfinite(atol) or atol < 0 or \
                (a["dtype"] != "f32" and atol != 0):
            self.bad(n, "atol %r (integers compare exactly; f32 needs a finite atol >= 0)" % atol)
            return
        x, y = self.rows(n), self.rows(ref_name)
        skip = set()
        if "skip_rows" in a:
            sr = a["skip_rows"]
            sa = self.arrays.get(sr.get("array")) if isinstance(sr, dict) else None
            mask = sr.get("mask") if isinstance(sr, dict) else None
            if sa is None or sa["name"] not in self.ok or sa["shape"] != [len(x)] or \
                    sa.get("provenance") != DV or not isinstance(mask, int) or mask <= 0:
                self.bad(n, "skip_rows %r unusable (needs a derived [rows] array and a mask > 0)" % sr)
                return
            skip = {r for r, v in enumerate(self.load(sa["name"])) if int(v) & mask}
            want = self.expected_skips(n, sa["name"], mask)
            if want is not None and want != len(skip):
                self.bad(n, "skips %d rows; the capture recorded %d tie-dependent rows" % (len(skip), want))
            if len(skip) >= len(x):
                self.bad(n, "skip_rows leaves no row to compare")
                return
        bad, worst = 0, 0.0
        for r in range(len(x)):
            if r in skip:
                continue
            for u, v in zip(x[r], y[r]):
                d = abs(u - v)
                worst = max(worst, d)
                if not d <= atol:
                    bad += 1
            self.tally.xc_elems += len(x[r])
        self.tally.xc_arrays += 1
        self.tally.xc_skipped_rows += len(skip)
        if bad:
            self.bad(n, "disagrees with %s in %d elements (max |diff| %.9g > atol %g)" % (ref_name, bad, worst, atol))

    def expected_skips(self, n, tie_name, mask):
        """Rows the capture counted as tie-dependent (bit 0), from `stats`."""
        m = re.match(r"^(pre|dec)/(p\d+)/.*/L(\d\d)$", tie_name)
        if not m or mask & 2:
            return None  # rank-order ties (bit 1) are not counted in stats
        group = {"pre": "prefill", "dec": "decode"}[m.group(1)]
        layers = sorted(k for k in self.arrays if re.match(r"^%s/%s/qsa/tie/L\d\d$" % (m.group(1), m.group(2)), k))
        try:
            counts = self.doc["stats"][m.group(2)][group]["qsa_rows_with_tie_dependent_set"]
            return counts[layers.index(tie_name)]
        except (KeyError, IndexError, ValueError, TypeError):
            self.bad(n, "no tie count in stats.%s.%s for %s" % (m.group(2), group, tie_name))
            return None

    # ------------------------------------------------------------ derived
    def check_derived(self):
        done = set()
        cfg = self.doc.get("config_resolved", {})
        prompts = {p.get("name"): p for p in self.doc.get("prompts", [])}

        def have(*names):
            return all(x in self.ok for x in names)

        for pname, p in sorted(prompts.items()):
            ids = "pre/%s/ids" % pname
            if have(ids) and list(self.load(ids)) != list(p.get("token_ids", [])):
                self.bad(ids, "differs from prompts[%s].token_ids" % pname)
            pre_l, dec_l = "pre/%s/logits" % pname, "dec/%s/logits" % pname
            inn, nxt, full = "dec/%s/in_ids" % pname, "dec/%s/next_ids" % pname, "full/%s/ids" % pname
            # an array is `done` once its re-derivation is attempted: when a source failed its
            # digest, that failure is the problem to report, not a missing re-derivation
            done.update(x for x in (nxt, inn, full) if x in self.arrays)
            if have(dec_l, nxt):
                got = [first_argmax(r) for r in self.rows(dec_l)]
                if list(self.load(nxt)) != got:
                    self.bad(nxt, "is not the first argmax of each row of %s" % dec_l)
            if have(pre_l, dec_l, inn):
                want = [first_argmax(self.rows(pre_l)[-1])] + [first_argmax(r) for r in self.rows(dec_l)[:-1]]
                if list(self.load(inn)) != want:
                    self.bad(inn, "is not the greedy chain (argmax of the previous logits row)")
            if have(ids, inn, full):
                if list(self.load(full)) != list(self.load(ids)) + list(self.load(inn)):
                    self.bad(full, "is not %s followed by %s" % (ids, inn))
            T = p.get("length", 0)
            for grp, pos0 in (("pre", 0), ("dec", T)):
                self.check_qsa_group(grp, pname, pos0, cfg, done)
        self.check_deq(done)
        for n, a in self.arrays.items():
            if a.get("provenance") == DV and n not in done and n in self.ok:
                self.bad(n, "derived, but check_fixtures has no re-derivation for it")
        self.tally.derived += len(done)

    def check_qsa_group(self, grp, pname, pos0, cfg, done):
        qsa = cfg.get("qsa", {})
        ratio, btk = qsa.get("indexer_compress_ratio"), cfg.get("qsa_block_topk")
        pfx = "%s/%s/qsa/" % (grp, pname)
        for n in sorted(self.arrays):
            if not n.startswith(pfx + "nblk/"):
                continue
            L = n.rsplit("/", 1)[1]
            nb, tie, sc, sel, cnt = (pfx + k + "/" + L for k in ("nblk", "tie", "score", "sel", "cnt"))
            if not isinstance(ratio, int) or not isinstance(btk, int) or ratio <= 0:
                self.bad(n, "config_resolved lacks qsa.indexer_compress_ratio / qsa_block_topk")
                return
            done.update((nb, tie))
            if have_all(self.ok, nb):
                if list(self.load(nb)) != [(pos0 + r + 1) // ratio for r in range(len(self.load(nb)))]:
                    self.bad(nb, "is not (pos+1)//%d" % ratio)
            if have_all(self.ok, nb, tie, sc):
                want = []
                for row, k_all in zip(self.rows(sc), self.load(nb)):
                    sv = sorted(row[:k_all], reverse=True)
                    k, t = min(btk, k_all), 0
                    if 0 < k < k_all and sv[k - 1] == sv[k]:
                        t |= 1
                    if any(sv[j] == sv[j + 1] for j in range(k - 1)):
                        t |= 2
                    want.append(t)
                if list(self.load(tie)) != want:
                    self.bad(tie, "tie bits differ from those the captured scores %s give" % sc)
            if have_all(self.ok, sel, cnt):
                # cnt is labelled upstream-capture as the row length of sel's ragged encoding
                for r, (row, c) in enumerate(zip(self.rows(sel), self.load(cnt))):
                    body = [v for v in row if v != -1]
                    if len(body) != c or list(row[:c]) != body or body != sorted(set(body)):
                        self.bad(cnt, "row %d: %d is not the length of the ascending prefix of %s" % (r, c, sel))
                        break

    def check_deq(self, done):
        names = [n for n in sorted(self.arrays) if n.startswith("deq/")]
        if not names:
            return
        ck = os.path.normpath(os.path.join(self.odir, self.doc.get("checkpoint", {}).get("dir", "../checkpoint")))
        st = SafeTensors(ck)
        for n in names:
            m = re.match(r"^deq/(gate|up|down)/L(\d\d)$", n)
            if not m:
                continue
            done.add(n)
            if n not in self.ok:
                continue
            a = self.arrays[n]
            E = a["shape"][0]
            got = self.load(n)
            per = len(got) // E if E else 0
            for e in range(E):
                key = "model.language_model.layers.%d.mlp.experts.%d.%s_proj" % (int(m.group(2)), e, m.group(1))
                try:
                    want = st.dequant_fp8(key + ".weight", key + ".weight_scale_inv")
                except (KeyError, ValueError) as exc:
                    self.bad(n, "cannot re-derive from the checkpoint: %s" % exc)
                    break
                if len(want) != per or tuple(want) != got[e * per:(e + 1) * per]:
                    self.bad(n, "expert %d differs from fp8 * scale_inv of the committed checkpoint" % e)
                    break


def have_all(ok, *names):
    return all(x in ok for x in names)


def fp8_e4m3fn(b):
    s, e, m = b >> 7, (b >> 3) & 15, b & 7
    if e == 15 and m == 7:
        return math.nan
    v = (m / 8.0) * 2.0 ** -6 if e == 0 else (1 + m / 8.0) * 2.0 ** (e - 7)
    return -v if s else v


FP8 = [fp8_e4m3fn(b) for b in range(256)]


class SafeTensors:
    """Just enough of the safetensors format to read F8_E4M3 and F32 tensors."""

    def __init__(self, ckdir):
        self.where = {}
        for fn in sorted(os.listdir(ckdir)):
            if not fn.endswith(".safetensors"):
                continue
            p = os.path.join(ckdir, fn)
            with open(p, "rb") as f:
                n = struct.unpack("<Q", f.read(8))[0]
                hdr = json.loads(f.read(n))
            for k, v in hdr.items():
                if k != "__metadata__":
                    self.where[k] = (p, 8 + n, v)

    def raw(self, key, dtype):
        p, base, v = self.where[key]
        if v["dtype"] != dtype:
            raise ValueError("%s is %s, not %s" % (key, v["dtype"], dtype))
        a, b = v["data_offsets"]
        with open(p, "rb") as f:
            f.seek(base + a)
            return f.read(b - a), v["shape"]

    def dequant_fp8(self, wkey, skey, block=128):
        q, (o, i) = self.raw(wkey, "F8_E4M3")
        sraw, sshape = self.raw(skey, "F32")
        scale = struct.unpack("<%df" % (len(sraw) // 4), sraw)
        bi = sshape[1]
        out = []
        for r in range(o):
            srow = (r // block) * bi
            for c in range(i):
                # fp8 has 4 significant bits and the scale 24: the double product is
                # exact, so packing it to f32 rounds once, like torch's f32 multiply.
                x = FP8[q[r * i + c]] * scale[srow + c // block]
                out.append(struct.unpack("<f", struct.pack("<f", x))[0])
        return out


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    args, pins = list(argv), None
    if args[:1] == ["--pins"]:
        if len(args) < 2:
            print("usage: check_fixtures.py [--pins FILE] [UPSTREAM_DIR]")
            return 2
        pins, args = args[1], args[2:]
    root = args[0] if args else os.path.join(here, "..", "..", "tests", "fixtures", "upstream")
    root = os.path.normpath(os.path.abspath(root))
    if not os.path.isdir(root):
        print("no fixture directory: " + root)
        return 1
    fixtures = os.path.dirname(root)
    pins = pins or os.path.join(fixtures, PINS_NAME)
    problems, tally = [], Tally()
    npins = check_pins(fixtures, pins, root, problems)
    rules = parse_rules(os.path.join(root, RULES_NAME), problems)
    names = [n for n in sorted(os.listdir(root)) if os.path.isdir(os.path.join(root, n))]
    for name in names:
        FixtureSet(root, name, rules, problems, tally).check()
    for p in problems:
        print("PROBLEM " + p)
    print("check_fixtures: %d fixture sets (%s), %d arrays (%s), %d pinned files, %d rules" % (
        len(names), ", ".join(names), tally.arrays,
        ", ".join("%d %s" % (v, k) for k, v in tally.by_label.items()), npins, len(rules)))
    print("check_fixtures: cross-checks: %d arrays, %d elements compared, %d rows skipped (ties); "
          "derived: %d arrays re-derived" % (tally.xc_arrays, tally.xc_elems, tally.xc_skipped_rows, tally.derived))
    print("check_fixtures: %d problems -> %s" % (len(problems), "OK" if not problems else "FAIL"))
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
