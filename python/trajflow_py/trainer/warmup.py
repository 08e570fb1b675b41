"""
A supervised warm-up before RL (`trainer.warmup`): a few AdamW steps of next-token cross-entropy
on demonstration conversations, learning only their assistant messages. RL reinforces what the
model already does now and then; a model that never writes a tool call gives it nothing to
reinforce, and a handful of demonstrations of the call, its result and the answer does.

Each conversation is rendered with the model's own chat template, as trajflow's prompts are: an
assistant message's tokens are those the rendering up to and including it adds after the
rendering up to it with the generation prompt (the template's own "assistant" header stays
unlearned, as in a sampled turn).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from pydantic import BaseModel, ConfigDict, ValidationError
from transformers import AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from .failures import invalid_config
from .inputs import WarmupSettings
from .log import Logger
from .validation import describe_errors


class DemoMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: str
    content: str


class Demonstration(BaseModel):
    model_config = ConfigDict(extra="forbid")
    messages: list[DemoMessage]


@dataclass(frozen=True)
class DemoSequence:
    ids: list[int]
    #: 1 where the token is an assistant message's: the loss is taken there only.
    learned: list[int]


def read_demonstrations(file: Path) -> list[Demonstration]:
    """The file's demonstrations; a bad line is refused naming its line number and what is wrong."""
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise invalid_config(f"trainer.warmup.demonstrations: cannot read {file}: {err}") from err
    demos: list[Demonstration] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            demo = Demonstration.model_validate(json.loads(line))
        except json.JSONDecodeError as err:
            raise invalid_config(f"{file} line {number}: not JSON: {err}") from err
        except ValidationError as err:
            raise invalid_config(f"{file} line {number}: {describe_errors(err)}") from err
        if not any(message.role == "assistant" for message in demo.messages):
            raise invalid_config(f"{file} line {number}: no assistant message to learn")
        demos.append(demo)
    if not demos:
        raise invalid_config(f"trainer.warmup.demonstrations: {file} holds no demonstration")
    return demos


def demo_sequence(tokenizer: PreTrainedTokenizerBase, demo: Demonstration) -> DemoSequence:
    messages = [message.model_dump() for message in demo.messages]

    def rendered(upto: int, generation_prompt: bool) -> list[int]:
        text = tokenizer.apply_chat_template(messages[:upto], tokenize=False, add_generation_prompt=generation_prompt)
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])

    ids = rendered(len(messages), False)
    learned = [0] * len(ids)
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        start, end = len(rendered(index, True)), len(rendered(index + 1, False))
        if ids[:end] != rendered(index + 1, False):
            raise invalid_config(f"the chat template renders demonstration messages differently once later ones follow (message {index})")
        learned[start:end] = [1] * (end - start)
    return DemoSequence(ids, learned)


def demo_sequences(model_dir: Path, file: Path) -> list[DemoSequence]:
    """The demonstrations of `file`, rendered with the chat template and tokenizer of the model in `model_dir`."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    return [demo_sequence(tokenizer, demo) for demo in read_demonstrations(file)]


def warm_up(model: PreTrainedModel, sequences: list[DemoSequence], settings: WarmupSettings, logger: Logger) -> list[float]:
    """Trains `model` in place on the demonstrations; returns each step's loss (mean over learned tokens)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate)
    losses: list[float] = []
    for step in range(settings.steps):
        batch = [sequences[(step * settings.batch_size + i) % len(sequences)] for i in range(settings.batch_size)]
        optimizer.zero_grad(set_to_none=True)
        learned_tokens = sum(sum(sequence.learned[1:]) for sequence in batch)
        total = torch.zeros(())
        for sequence in batch:
            ids = torch.tensor([sequence.ids])
            logits = model(input_ids=ids).logits[0, :-1]
            # Token t is predicted at position t-1: the loss of the learned tokens after the first.
            targets = ids[0, 1:]
            mask = torch.tensor(sequence.learned[1:], dtype=torch.bool)
            loss = torch.nn.functional.cross_entropy(logits[mask].float(), targets[mask], reduction="sum") / learned_tokens
            loss.backward()
            total += loss.detach()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(float(total))
        logger.info("warm-up step", step=step, loss=round(float(total), 4))
    return losses
