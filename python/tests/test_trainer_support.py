"""
Helpers the trainer tests share (no tests here): a tiny random Llama model directory, and a run's
store written as the TypeScript side writes it (camelCase JSON under <dataDir>/runs/<runId>/).
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from trajflow_py.trainer.files import seal_record

TEMPERATURE = 0.7
COMPATIBILITY = {"code": "build-1", "model": "m-hash", "modules": "p-hash"}


def tiny_model_dir(path: Path, seed: int = 0) -> Path:
    """A randomly initialised 2-layer Llama (hidden 32, vocab 64) with a stand-in tokenizer and template."""
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=True,
    )
    LlamaForCausalLM(config).save_pretrained(path, safe_serialization=True)
    (path / "tokenizer.json").write_text('{"stand-in": "tokenizer"}')
    (path / "chat_template.jinja").write_text("{{ messages }}")
    return path


def full_logprobs(model, ids: list[int], temperature: float = TEMPERATURE) -> list[float]:
    """log p(ids[i] | ids[<i]) for i = 1..n-1 from one full forward pass (independent of the trainer's)."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    logprobs = torch.log_softmax(logits / temperature, dim=-1)
    return [float(logprobs[i - 1, ids[i]]) for i in range(1, len(ids))]


def turn_json(
    trajectory_id: str, turn: int, delta: list[int], completion: list[int], logprobs: list[float], versions: list[int], messages=None, starts_context=None
) -> dict:
    record = {
        "trajectoryId": trajectory_id,
        "turn": turn,
        "messages": messages if messages is not None else [{"role": "user", "content": f"turn {turn}"}],
        "promptDeltaIds": delta,
        "completionIds": completion,
        "logprobs": logprobs,
        "policyVersions": versions,
        "finishReason": "stop",
        "text": "",
        "contextTokens": 0,
        "someFutureField": True,
    }
    if starts_context is not None:
        record["startsContext"] = starts_context
    return record


def write_trajectory(data_dir: Path, run_id: str, trajectory_id: str, turns: list[dict], env_return: float, turn_penalties=None) -> None:
    folder = data_dir / "runs" / run_id / "trajectories" / trajectory_id
    folder.mkdir(parents=True, exist_ok=True)
    for record in turns:
        # Sealed as the TypeScript store writes them (src/store/files.ts).
        (folder / f"turn-{record['turn']:06d}.json").write_bytes(seal_record(record))
    summary = {
        "runId": run_id,
        "trajectoryId": trajectory_id,
        "reward": env_return,
        "envReturn": env_return,
        "turns": len(turns),
        "time": {"totalMs": 10, "generationMs": 6, "environmentMs": 3, "waitingMs": 1},
    }
    if turn_penalties is not None:
        summary["turnPenalties"] = turn_penalties
    (folder / "summary.json").write_bytes(seal_record(summary))


def group_json(group_id: str, trajectory_ids: list[str], rewards: list[float], solved: list[bool]) -> dict:
    mean = sum(rewards) / len(rewards)
    return {
        "runId": "ignored",
        "groupId": group_id,
        "trajectoryIds": trajectory_ids,
        "rewards": rewards,
        "solved": solved,
        "turns": [1] * len(rewards),
        "failed": [],
        "rewardMean": mean,
        "rewardStd": 0,
    }


def trainer_config(**overrides) -> dict:
    """A TrainerConfig as the workflow sends it: config/schema.ts defaults, then the case's own."""
    config = {
        "advantage": "grpo",
        "loss": {"epsilon": 0.2, "epsilonHigh": 0.28, "beta": 0, "kl": "k3", "aggregation": "token-mean"},
        "groupFilter": "none",
        "learningRate": 1e-3,
        "maxGradNorm": 1,
        "adamEpsilon": 1e-8,
        "optimizerStepsPerBatch": 1,
        "batchGroups": 4,
        "steps": 40,
        "maxStaleness": 1,
        "weightSync": "turn",
        "formatWarmupSteps": 0,
        "formatWarmupLearningRate": 1e-2,
        "precision": "float32",
    }
    config.update(overrides)
    return config


def settings_json(data_dir: Path, model_dir: Path, address: str = "127.0.0.1:7233", task_queue: str = "trajflow-trainer") -> dict:
    return {
        "temporal": {"address": address, "namespace": "default"},
        "taskQueue": task_queue,
        "dataDir": str(data_dir),
        "modelPath": str(model_dir),
        "compatibility": dict(COMPATIBILITY),
    }
