#!/usr/bin/env bash
# Rebuilds static/vendor/codemirror/ (the CodeMirror 6 library of the SQL console's editor)
# from editor/: the packages at the versions editor/package-lock.json pins, bundled and
# minified by esbuild (editor/build.mjs), with their licences in LICENSES.txt.
#
# The bundle is committed: running the app, its tests or CI needs no npm. Run this after
# changing editor/ (a version, the parts src/codemirror.js names); tests/unit/
# test_editor_bundle.py fails until the committed bundle is rebuilt from the sources.
#
#   scripts/build_editor.sh            rebuild at the pinned versions
#   (cd editor && npm install --save-exact @codemirror/view@6.x.y) && scripts/build_editor.sh
#                                      move a package to another version first
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT/editor"

if ! command -v npm >/dev/null; then
    echo "build_editor.sh needs node and npm (Debian: apt-get install nodejs npm)" >&2
    exit 1
fi
# Exactly the lock's versions. esbuild's install script only checks its platform binary,
# which its package depends on by name: nothing runs at install time.
npm ci --no-audit --no-fund --ignore-scripts
node build.mjs
