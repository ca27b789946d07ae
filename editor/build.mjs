// Bundles src/codemirror.js with esbuild into static/vendor/codemirror/codemirror.min.js (one
// minified script, the global `LakeviewCodeMirror`) and gathers the licence of every package
// that went into it into LICENSES.txt beside it. Run by scripts/build_editor.sh.
//
// codemirror.min.js.gz beside it is what WhiteNoise sends to browsers that take gzip (a
// third of the bytes); gzip's header holds no time, so a rebuild gives the same file.
//
// The bundle's first line records the SHA-256 of its sources (SOURCES, each as its path, a
// line feed, its own SHA-256 in hex and a line feed), which tests/unit/test_editor_bundle.py
// computes again: a change to the versions or the entry without a rebuild fails there.
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { constants, gzipSync } from "node:zlib";

import { build } from "esbuild";

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = dirname(HERE);
const OUT = join(ROOT, "static", "vendor", "codemirror");
export const SOURCES = [
  "editor/package.json",
  "editor/package-lock.json",
  "editor/src/codemirror.js",
  "editor/build.mjs",
  "scripts/build_editor.sh",
];

function sha256(data) {
  return createHash("sha256").update(data).digest("hex");
}

const sourcesHash = sha256(
  SOURCES.map((path) => `${path}\n${sha256(readFileSync(join(ROOT, path)))}\n`).join(""),
);

const result = await build({
  entryPoints: [join(HERE, "src", "codemirror.js")],
  bundle: true,
  minify: true,
  format: "iife",
  globalName: "LakeviewCodeMirror",
  target: ["es2020"],
  legalComments: "none",
  metafile: true,
  write: false,
  logLevel: "warning",
});

// The packages whose files are in the bundle, from esbuild's list of its inputs.
const packages = new Map();
for (const input of Object.keys(result.metafile.inputs)) {
  const match = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input);
  if (!match || packages.has(match[1])) continue;
  const folder = join(HERE, "node_modules", match[1]);
  const manifest = JSON.parse(readFileSync(join(folder, "package.json"), "utf8"));
  packages.set(match[1], { version: manifest.version, license: manifest.license, folder });
}
const names = [...packages.keys()].sort();

const header =
  `/*! CodeMirror 6 for Lakeview's SQL console (static/js/editor.js): built by ` +
  `scripts/build_editor.sh from editor/, do not edit.\n` +
  ` * sources-sha256: ${sourcesHash}\n` +
  ` * packages: ${names.map((n) => `${n}@${packages.get(n).version}`).join(" ")}\n` +
  ` * Licences (${[...new Set(names.map((n) => packages.get(n).license))].join(", ")}): ` +
  `LICENSES.txt beside this file. */\n`;

const licences = names.map((name) => {
  const { version, license, folder } = packages.get(name);
  const text = readFileSync(join(folder, "LICENSE"), "utf8").trim();
  return `${name}@${version} (${license})\n${"-".repeat(72)}\n${text}\n`;
});

mkdirSync(OUT, { recursive: true });
const bundle = header + result.outputFiles[0].text;
writeFileSync(join(OUT, "codemirror.min.js"), bundle);
const zipped = gzipSync(bundle, { level: constants.Z_BEST_COMPRESSION });
writeFileSync(join(OUT, "codemirror.min.js.gz"), zipped);
writeFileSync(
  join(OUT, "LICENSES.txt"),
  `The packages bundled into codemirror.min.js, with their licences.\n\n${licences.join("\n")}`,
);
console.log(
  `${relative(ROOT, join(OUT, "codemirror.min.js"))}: ${bundle.length} bytes ` +
    `(${zipped.length} gzipped), ` +
    `${names.length} packages, sources ${sourcesHash.slice(0, 12)}`,
);
