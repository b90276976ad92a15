// gguf-dump.mjs: print the @huggingface/gguf view of a GGUF file in the
// canonical JSON that tests/tools/gguf-dump.c prints from our reader, so the
// interop test can compare the two byte for byte.  A test tool.
//
// Canonical form (shared with gguf-dump.c): objects with keys sorted by
// their UTF-8 bytes, two-space indentation, strings escaped as
// JSON.stringify does; 64-bit integers and offsets as decimal strings;
// f32/f64 as the hex of their IEEE bits; kv keyed by name; tensors in file
// order with dims as stored (GGML order) and absolute offsets (the package
// reports offsets relative to the data section: tensorDataOffset is added).
//
// usage: node gguf-dump.mjs FILE
// The package is loaded from $HB_NPM_DIR/node_modules (HB_NPM_DIR defaults
// to build/npm, relative to the current directory); scripts/npm-deps
// installs it there.

import { createRequire } from "node:module";
import path from "node:path";
import process from "node:process";

const npmDir = path.resolve(process.env.HB_NPM_DIR ?? "build/npm");
const require = createRequire(path.join(npmDir, "package.json"));
const { gguf, GGUFValueType } = require("@huggingface/gguf");

const TYPE_NAMES = {
  [GGUFValueType.UINT8]: "u8",
  [GGUFValueType.INT8]: "i8",
  [GGUFValueType.UINT16]: "u16",
  [GGUFValueType.INT16]: "i16",
  [GGUFValueType.UINT32]: "u32",
  [GGUFValueType.INT32]: "i32",
  [GGUFValueType.FLOAT32]: "f32",
  [GGUFValueType.BOOL]: "bool",
  [GGUFValueType.STRING]: "string",
  [GGUFValueType.ARRAY]: "array",
  [GGUFValueType.UINT64]: "u64",
  [GGUFValueType.INT64]: "i64",
  [GGUFValueType.FLOAT64]: "f64",
};

function bitsHex(value, width) {
  const view = new DataView(new ArrayBuffer(width));
  if (width === 4) {
    view.setFloat32(0, value, true);
    return "0x" + view.getUint32(0, true).toString(16).padStart(8, "0");
  }
  view.setFloat64(0, value, true);
  return "0x" + view.getBigUint64(0, true).toString(16).padStart(16, "0");
}

function scalar(type, value) {
  switch (type) {
    case "u64":
    case "i64":
      return BigInt(value).toString();
    case "f32":
      return bitsHex(value, 4);
    case "f64":
      return bitsHex(value, 8);
    default:
      return value; // small integers, bool, string
  }
}

function utf8Compare(a, b) {
  return Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"));
}

function canon(v, depth) {
  const pad = "  ".repeat(depth + 1);
  const end = "  ".repeat(depth);
  if (Array.isArray(v)) {
    if (v.length === 0) return "[]";
    return "[\n" + v.map((x) => pad + canon(x, depth + 1)).join(",\n") + "\n" + end + "]";
  }
  if (v !== null && typeof v === "object") {
    const keys = Object.keys(v).sort(utf8Compare);
    if (keys.length === 0) return "{}";
    return (
      "{\n" +
      keys.map((k) => pad + JSON.stringify(k) + ": " + canon(v[k], depth + 1)).join(",\n") +
      "\n" +
      end +
      "}"
    );
  }
  return JSON.stringify(v);
}

async function main() {
  const file = process.argv[2];
  if (!file || process.argv.length !== 3) {
    process.stderr.write("usage: gguf-dump.mjs FILE\n");
    process.exit(2);
  }
  const { metadata, typedMetadata, tensorInfos, tensorDataOffset } = await gguf(path.resolve(file), {
    allowLocalFile: true,
    typedMetadata: true,
  });
  const header = new Set(["version", "tensor_count", "kv_count"]);
  const kv = Object.create(null);
  for (const key of Object.keys(typedMetadata)) {
    if (header.has(key)) continue;
    const entry = typedMetadata[key];
    const type = TYPE_NAMES[entry.type];
    if (type === "array") {
      const elem = TYPE_NAMES[entry.subType];
      kv[key] = { elem_type: elem, type, value: entry.value.map((x) => scalar(elem, x)) };
    } else {
      kv[key] = { type, value: scalar(type, entry.value) };
    }
  }
  const alignment = Number(metadata["general.alignment"] ?? 32);
  const out = {
    alignment,
    data_offset: tensorDataOffset.toString(),
    kv,
    kv_count: metadata.kv_count.toString(),
    tensor_count: metadata.tensor_count.toString(),
    tensors: tensorInfos.map((t) => ({
      dims: t.shape.map((d) => d.toString()),
      name: t.name,
      offset: (tensorDataOffset + t.offset).toString(),
      rel_offset: t.offset.toString(),
      type: t.dtype,
    })),
    version: metadata.version,
  };
  process.stdout.write(canon(out, 0) + "\n");
}

main().catch((e) => {
  process.stderr.write(`gguf-dump.mjs: ${e && e.message ? e.message : e}\n`);
  process.exit(1);
});
