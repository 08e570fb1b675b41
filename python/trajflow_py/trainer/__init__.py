"""
The Python trainer worker of real models: a Temporal worker on the trainer task queue serving the
same `preparePolicy` and `trainStep` activities as activities/trainer.ts (same names, same JSON,
same files), but training a Hugging Face causal LM with PyTorch.

    cd python && ../.venv/bin/python -m trajflow_py.trainer --settings FILE

Module map: worker (the process) -> activities (preparePolicy, trainStep) -> batch (store ->
samples: sequences, advantages) -> policy_trainer (AdamW on loss; policy: model load/save and
logprobs) -> step_metrics + utilization (the metrics line) -> files/layout (durable writes, where).
Beside them: settings, inputs, records, validation (the JSON read), compatibility and failures
(refusals), heartbeat and cancellation (a blocking step inside Temporal), log.
"""

import os

# No model hub is reachable, and none is ever wanted: transformers must never try the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Progress bars (loading and writing weights) are noise in a worker's log.
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
