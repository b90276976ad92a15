"""Shared helpers for the upstream oracle scripts (device side: needs numpy).

Only file writing, hashing and the manifest format live here. Nothing in this
file knows Qwen4Exp math, so the independent cross-checks (xcheck.py) and the
upstream capture (capture.py) do not share any numeric helper.
"""
import datetime
import hashlib
import json
import os
import platform
import sys

import numpy as np

SCHEMA = "hebrus-oracle-v1"
PROVENANCE = ("upstream-capture", "independent-cross-check", "contract-control", "derived")
# Little-endian, row-major; these are the only dtypes the C reader supports.
DTYPES = {"f32": "<f4", "i32": "<i4", "i64": "<i8"}
HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = ("common.py", "make_checkpoints.py", "capture.py", "xcheck.py", "derive.py",
           "device_run.sh", "check_fixtures.py")
# The label every array must carry is fixed by the committed rule table, not by
# whoever writes the producer: a regeneration that would label an array other
# than the table says stops here instead of shipping the over-claim (AFN-014).
RULES = os.path.join(HERE, "..", "..", "tests", "fixtures", "upstream", "PROVENANCE.rules")


def _load_rules():
    sys.path.insert(0, HERE)
    import check_fixtures
    problems = []
    rules = check_fixtures.parse_rules(RULES, problems)
    assert not problems, problems
    return rules, check_fixtures.rule_for


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def producer():
    import safetensors
    import torch
    import transformers
    from transformers.models.qwen4_exp import configuration_qwen4_exp, modeling_qwen4_exp
    dev = "cpu (float32, eager); host " + platform.node()
    if torch.cuda.is_available():
        dev += "; accelerator present but unused: " + torch.cuda.get_device_name(0)
    return {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "safetensors": safetensors.__version__,
        "numpy": np.__version__,
        "python": sys.version.split()[0],
        "modeling_sha256": sha256_file(modeling_qwen4_exp.__file__),
        "configuration_sha256": sha256_file(configuration_qwen4_exp.__file__),
        "script_sha256": {s: sha256_file(os.path.join(HERE, s)) for s in SCRIPTS
                          if os.path.exists(os.path.join(HERE, s))},
        "device": dev,
        "torch_threads": torch.get_num_threads(),
        "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def checkpoint_block(ckdir):
    """Digest of every file save_pretrained (or derive.py) left in checkpoint/,
    plus the safetensors header view (name -> dtype, shape, file)."""
    from safetensors import safe_open
    files, tensors = {}, {}
    for fn in sorted(os.listdir(ckdir)):
        files[fn] = sha256_file(os.path.join(ckdir, fn))
        if fn.endswith(".safetensors"):
            with safe_open(os.path.join(ckdir, fn), "pt") as f:
                for k in f.keys():
                    sl = f.get_slice(k)
                    tensors[k] = {"file": fn, "dtype": sl.get_dtype(), "shape": list(sl.get_shape())}
    return {"dir": "../checkpoint", "files": files, "tensors": dict(sorted(tensors.items()))}


class Oracle:
    """Collects arrays into <dir>/<name with / -> .>.bin and their manifest entries."""

    def __init__(self, outdir):
        self.dir = outdir
        os.makedirs(outdir, exist_ok=True)
        self.arrays = []
        self.by_name = {}

    def add(self, name, arr, dtype, provenance, source, checks=None, atol=None, skip_rows=None):
        assert provenance in PROVENANCE, provenance
        assert name not in self.by_name, "duplicate array " + name
        if not hasattr(self, "rules"):
            self.rules, self.rule_for = _load_rules()
        rule = self.rule_for(name, self.rules)
        assert rule is not None, name + ": no rule in PROVENANCE.rules"
        assert rule[1] == provenance, "%s: labelled %s, PROVENANCE.rules:%d says %s" % (
            name, provenance, rule[2], rule[1])
        # a cross-check that names nothing it checks is an over-claim
        assert (provenance == "independent-cross-check") == (checks is not None), (name, checks)
        src = np.asarray(arr)
        a = np.ascontiguousarray(src.astype(DTYPES[dtype]))
        if dtype == "f32":
            assert np.isfinite(a).all(), name + " has non-finite values"
        else:  # integer narrowing must be lossless
            assert np.array_equal(a.astype(np.int64), src.astype(np.int64)), name + " lost bits"
        fn = name.replace("/", ".") + ".bin"
        with open(os.path.join(self.dir, fn), "wb") as f:
            f.write(a.tobytes(order="C"))
        entry = {"name": name, "file": fn, "dtype": dtype, "shape": list(a.shape),
                 "sha256": hashlib.sha256(a.tobytes()).hexdigest(),
                 "provenance": provenance, "source": source}
        if checks is not None:
            # A cross-check names the upstream array it re-derives; check_fixtures
            # compares them (exact for ints, |a-b| <= atol for f32).
            ref = self.by_name[checks]
            assert ref["shape"] == entry["shape"] and ref["dtype"] == dtype, (name, checks)
            entry["checks"] = checks
            entry["atol"] = float(atol or 0.0)
            if skip_rows:
                # rows r with (int(skip_rows array[r]) & mask) != 0 are not compared
                entry["skip_rows"] = {"array": skip_rows[0], "mask": skip_rows[1]}
        self.arrays.append(entry)
        self.by_name[name] = entry
        self.mem = getattr(self, "mem", {})
        self.mem[name] = a
        return a

    def write_manifest(self, **fields):
        doc = {"schema": SCHEMA}
        doc.update(fields)
        doc["arrays"] = self.arrays
        with open(os.path.join(self.dir, "manifest.json"), "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
