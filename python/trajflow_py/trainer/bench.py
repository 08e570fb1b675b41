"""
How fast the real-model trainer (policy_trainer.py) trains a Hugging Face model on this machine:
one synthetic batch shaped like an agentic RL batch (prompt tokens masked out, completion tokens
trained, advantages +-1) trained with every sequence alone (`microBatchTokens` 0), packed at each
given budget, and packed on ranks (torch.distributed: NCCL on GPUs, gloo on CPUs, as torchrun
starts the trainer). Prints tokens/s and the model FLOPs utilisation against a dense matmul peak measured
on the same device with the same thread count, before and after the in-process rounds.

    cd python && ../.venv/bin/python -m trajflow_py.trainer.bench --model DIR [--sequences 8]
        [--rounds 2] [--micro-batch-tokens 1024] [--ranks 2] [--threads N]
        [--precision float32|bfloat16] [--random-weights]

(`npm run bench:trainer -- --model DIR ...` runs this.) The in-process modes share one model and
one optimizer and alternate round by round, so the ratios between them compare like with like;
the ranks run in their own torchrun processes, as a block after the in-process rounds, each with
threads/ranks threads so the machine's threads stay the same.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM

from .distributed import Ranks, join_ranks, leave_ranks
from .inputs import Precision, TrainerConfig
from .packing import fed_length
from .policy import default_device
from .policy_trainer import PolicyTrainer
from .samples import TrainingSample, masked_tokens

TEMPERATURE = 1.0
#: The package's parent: the torchrun children import trajflow_py from it wherever they start.
PYTHON_SOURCES = Path(__file__).resolve().parents[2]
#: What the issue asks of the trainer: packed at least this many times one-at-a-time's speed, and
#: at least this fraction of the measured matmul peak.
PACKED_SPEEDUP_TARGET = 3.0
MFU_TARGET = 0.40
#: The dtype whose matmul peak a precision's MFU is measured against: what its matmuls run in.
PEAK_DTYPES: dict[Precision, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16}
PRECISION_NOTES: dict[Precision, str] = {"float32": "float32", "bfloat16": "bfloat16 compute on float32 master weights"}


@dataclass(frozen=True)
class Mode:
    label: str
    micro_batch_tokens: int
    #: Ranks of a torchrun block; 0: in this process, without a process group.
    ranks: int = 0


@dataclass(frozen=True)
class Timing:
    mode: Mode
    step_seconds: list[float]

    @property
    def median_seconds(self) -> float:
        return statistics.median(self.step_seconds)


@dataclass(frozen=True)
class Peak:
    gflops: float
    size: int
    matmuls: int
    seconds: float


@dataclass(frozen=True)
class BenchReport:
    model: Path
    params: int
    embedding_params: int
    #: What runs at every fed token: every parameter but the input embeddings (a lookup) and the output head.
    body_params: int
    #: The output head (tied or not), which the trainer projects at trained targets only.
    head_params: int
    device: str
    threads: int
    precision: Precision
    sequences: int
    fed_tokens: int
    trained_tokens: int
    #: The larger of `peaks`, timed before and after the in-process rounds.
    peak: Peak
    peaks: tuple[Peak, Peak]
    timings: list[Timing]

    def fed_per_second(self, timing: Timing) -> float:
        return self.fed_tokens / timing.median_seconds

    def trained_per_second(self, timing: Timing) -> float:
        return self.trained_tokens / timing.median_seconds

    def flops_per_step(self) -> float:
        """
        Model FLOPs of a step: a forward and a backward pass (2 + 4 FLOPs a parameter a token) of the
        body over every fed token, and of the output head over the trained targets only (attention's
        own FLOPs left out):  6 x body x fed + 6 x head x trained.
        """
        return 6 * self.body_params * self.fed_tokens + 6 * self.head_params * self.trained_tokens

    def mfu(self, timing: Timing) -> float:
        """Model FLOPs utilisation: the step's model FLOPs a second over the measured peak."""
        return self.flops_per_step() / timing.median_seconds / (self.peak.gflops * 1e9)

    def speedup(self, faster: Timing, slower: Timing) -> float:
        return slower.median_seconds / faster.median_seconds


def token_range(text: str) -> tuple[int, int]:
    low, sep, high = text.partition("-")
    try:
        bounds = (int(low), int(high if sep else low))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected MIN-MAX token counts, got '{text}'") from None
    if not 1 <= bounds[0] <= bounds[1]:
        raise argparse.ArgumentTypeError(f"expected 1 <= MIN <= MAX, got '{text}'")
    return bounds


def budgets(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated token budgets, got '{text}'") from None
    if not values or any(value < 1 for value in values):
        raise argparse.ArgumentTypeError(f"every packed budget must be >= 1 token, got '{text}'")
    return values


def non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got '{text}'")
    return value


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'")
    return value


def parse_options(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="trajflow_py.trainer.bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="a Hugging Face model directory")
    parser.add_argument("--sequences", type=positive, default=8, help="sequences in the batch (default 8)")
    parser.add_argument("--rounds", type=positive, default=2, help="timed steps of each mode, after one warm-up step (default 2)")
    parser.add_argument("--warmup-sequences", type=positive, default=2, help="the batch's first sequences the warm-up step trains (default 2)")
    parser.add_argument("--micro-batch-tokens", type=budgets, default=[1024], help="packed budgets, comma-separated (default 1024)")
    parser.add_argument("--prompt-tokens", type=token_range, default=(100, 300), help="MIN-MAX untrained tokens a sequence (default 100-300)")
    parser.add_argument("--completion-tokens", type=token_range, default=(20, 120), help="MIN-MAX trained tokens a sequence (default 20-120)")
    parser.add_argument(
        "--ranks",
        type=non_negative,
        default=2,
        help="ranks of the distributed block (torchrun: NCCL on GPUs, gloo on CPUs), at the smallest budget; 0: none (default 2)",
    )
    parser.add_argument("--threads", type=positive, default=torch.get_num_threads(), help="threads in all (default: torch's, the cores)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--precision",
        choices=("float32", "bfloat16"),
        default="float32",
        help="the trainer's precision (bfloat16: bf16 compute on float32 master weights) and the peak's matmul dtype (default float32)",
    )
    parser.add_argument(
        "--random-weights",
        action="store_true",
        help="build the model from DIR's config.json alone, with random weights: speed does not depend on the values, "
        "and a machine the weights cannot reach still benches the architecture",
    )
    parser.add_argument("--peak-size", type=positive, default=2048, help="side of the square matmul the peak times (default 2048)")
    parser.add_argument("--peak-seconds", type=float, default=2.0, help="how long the peak is timed (default 2)")
    # Set by the distributed block for its torchrun children only.
    parser.add_argument("--ranks-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--result-file", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def synthetic_batch(count: int, vocab_size: int, prompt: tuple[int, int], completion: tuple[int, int], seed: int) -> list[TrainingSample]:
    """Random sequences: a prompt trajflow wrote (loss mask 0) then a sampled completion (mask 1), advantage +-1."""
    rng = random.Random(seed)
    samples = []
    for _ in range(count):
        prompt_length, completion_length = rng.randint(*prompt), rng.randint(*completion)
        ids = [rng.randrange(vocab_size) for _ in range(prompt_length + completion_length)]
        samples.append(
            TrainingSample(
                ids=ids,
                loss_mask=[0] * prompt_length + [1] * completion_length,
                behaviour_logprobs=[None] * prompt_length + [-1.0] * completion_length,
                policy_versions=[-1] * prompt_length + [0] * completion_length,
                advantage=rng.choice((-1.0, 1.0)),
            )
        )
    return samples


def trainer_config(micro_batch_tokens: int, precision: Precision) -> TrainerConfig:
    # One AdamW step a batch: more would add a no-gradient pass per later minibatch, which the 6N
    # FLOPs count does not hold.
    return TrainerConfig.model_validate(
        {
            "advantage": "grpo",
            "loss": {"epsilon": 0.2, "epsilonHigh": 0.28, "beta": 0, "kl": "k3", "aggregation": "token-mean"},
            "groupFilter": "none",
            "learningRate": 1e-6,
            "maxGradNorm": 1,
            "adamEpsilon": 1e-8,
            "optimizerStepsPerBatch": 1,
            "formatWarmupSteps": 0,
            "maxStaleness": 1,
            "precision": precision,
            "microBatchTokens": micro_batch_tokens,
        }
    )


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_peak(device: torch.device, dtype: torch.dtype, size: int, seconds: float) -> Peak:
    """Dense matmul GFLOP/s in `dtype`: size x size products back to back for about `seconds`, at torch's current thread count."""
    a, b = torch.randn(size, size, device=device, dtype=dtype), torch.randn(size, size, device=device, dtype=dtype)
    out = torch.empty(size, size, device=device, dtype=dtype)
    torch.matmul(a, b, out=out)  # the first one allocates and picks kernels
    synchronize(device)
    matmuls, started = 0, time.perf_counter()
    while True:
        torch.matmul(a, b, out=out)
        matmuls += 1
        synchronize(device)
        elapsed = time.perf_counter() - started
        if elapsed >= seconds:
            return Peak(gflops=2 * size**3 * matmuls / elapsed / 1e9, size=size, matmuls=matmuls, seconds=elapsed)


def progress(line: str) -> None:
    """A line on stderr as the bench goes (a step of a real model on a CPU takes a minute)."""
    print(line, file=sys.stderr, flush=True)


def timed_step(trainer: PolicyTrainer, batch: list[TrainingSample]) -> float:
    """One train step on the batch, in seconds; raises if the step did not train the whole batch."""
    metrics, _ = trainer.train_batch(batch)
    expected = masked_tokens(batch)
    if metrics.tokens != expected or metrics.sequences != len(batch):
        raise RuntimeError(f"the step trained {metrics.tokens} tokens of {metrics.sequences} sequences, expected {expected} of {len(batch)}")
    return metrics.step_ms / 1000


def batch_for(options: argparse.Namespace, trainer: PolicyTrainer) -> list[TrainingSample]:
    vocab_size, max_context = trainer.limits
    longest = options.prompt_tokens[1] + options.completion_tokens[1]
    if longest > max_context:
        raise ValueError(f"--prompt-tokens and --completion-tokens may reach {longest} tokens, past the model's {max_context}")
    return synthetic_batch(options.sequences, vocab_size, options.prompt_tokens, options.completion_tokens, options.seed)


def measure_in_process(options: argparse.Namespace, ranks: Ranks) -> tuple[list[Timing], PolicyTrainer, list[TrainingSample]]:
    """Every sequence alone and each packed budget, on one model and optimizer, alternating which goes first round by round."""
    modes = [Mode("one at a time", 0)] + [Mode(f"packed {budget}", budget) for budget in options.micro_batch_tokens]
    first = PolicyTrainer.load(options.model, options.model, options.model, trainer_config(0, options.precision), TEMPERATURE, ranks)
    trainers = [first] + [
        PolicyTrainer(first.model, first.optimizer, trainer_config(mode.micro_batch_tokens, options.precision), TEMPERATURE, ranks) for mode in modes[1:]
    ]
    batch = batch_for(options, first)
    for trainer in trainers:  # warm-up: first passes allocate and pick kernels
        timed_step(trainer, batch[: options.warmup_sequences])
    seconds: list[list[float]] = [[] for _ in modes]
    for round_ in range(options.rounds):
        order = list(range(len(modes)))
        for i in order if round_ % 2 == 0 else reversed(order):
            seconds[i].append(timed_step(trainers[i], batch))
            progress(f"round {round_ + 1}: {modes[i].label} {seconds[i][-1]:.2f} s")
    return [Timing(mode, times) for mode, times in zip(modes, seconds, strict=True)], first, batch


def worker_arguments(options: argparse.Namespace, budget: int, result_file: Path) -> list[str]:
    """The options of one rank of the distributed block."""
    return [
        "--ranks-worker",
        f"--result-file={result_file}",
        f"--model={options.model}",
        f"--sequences={options.sequences}",
        f"--rounds={options.rounds}",
        f"--warmup-sequences={options.warmup_sequences}",
        f"--micro-batch-tokens={budget}",
        f"--prompt-tokens={options.prompt_tokens[0]}-{options.prompt_tokens[1]}",
        f"--completion-tokens={options.completion_tokens[0]}-{options.completion_tokens[1]}",
        f"--threads={max(1, options.threads // options.ranks)}",
        f"--seed={options.seed}",
        f"--precision={options.precision}",
    ]


def measure_on_ranks(options: argparse.Namespace) -> Timing:
    """The smallest budget (the most packs to share among the ranks) on `options.ranks` torchrun processes (the steps rank 0 timed)."""
    budget = min(options.micro_batch_tokens)
    with tempfile.TemporaryDirectory(prefix="trainer-bench-") as folder:
        result_file = Path(folder) / "ranks.json"
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={options.ranks}", "-m", "trajflow_py.trainer.bench"]
        threads = str(max(1, options.threads // options.ranks))
        path = os.pathsep.join(part for part in (str(PYTHON_SOURCES), os.environ.get("PYTHONPATH")) if part)
        env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": threads, "HF_HUB_OFFLINE": "1"}
        done = subprocess.run([*command, *worker_arguments(options, budget, result_file)], env=env, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"the {options.ranks}-rank block exited with code {done.returncode}")
        step_seconds = json.loads(result_file.read_text())["stepSeconds"]
    label = f"packed {budget}, {options.ranks} rank{'s' if options.ranks > 1 else ''}"
    return Timing(Mode(label, budget, options.ranks), step_seconds)


def rank_worker(options: argparse.Namespace) -> None:
    """One rank of the distributed block: warm-up then the rounds; rank 0 writes its step times to the result file."""
    torch.set_num_threads(options.threads)
    ranks = join_ranks()
    try:
        config = trainer_config(options.micro_batch_tokens[0], options.precision)
        trainer = PolicyTrainer.load(options.model, options.model, options.model, config, TEMPERATURE, ranks)
        batch = batch_for(options, trainer)
        timed_step(trainer, batch[: options.warmup_sequences])
        step_seconds = []
        for round_ in range(options.rounds):
            step_seconds.append(timed_step(trainer, batch))
            if ranks.leader:
                progress(
                    f"round {round_ + 1}: packed {options.micro_batch_tokens[0]} on {ranks.world} rank{'s' if ranks.world > 1 else ''} {step_seconds[-1]:.2f} s"
                )
        if ranks.leader:
            options.result_file.write_text(json.dumps({"stepSeconds": step_seconds}))
    finally:
        leave_ranks(ranks)


def random_model(source: Path, dest: Path) -> Path:
    """A checkpoint in `dest` of `source`'s architecture (its config.json alone) with random weights."""
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(source), dtype=torch.float32)
    model.save_pretrained(dest)
    return dest


def parameter_counts(model: torch.nn.Module) -> tuple[int, int, int, int]:
    """Parameters (a tied head counted once), those of the input embeddings, of the body, and of the output head."""
    embeddings = model.get_input_embeddings()  # type: ignore[operator]
    head = model.get_output_embeddings()  # type: ignore[operator]
    params = sum(p.numel() for p in model.parameters())
    embedding_params = sum(p.numel() for p in embeddings.parameters())
    head_params = head.weight.numel()
    tied = head.weight is embeddings.weight
    return params, embedding_params, params - embedding_params - (0 if tied else head_params), head_params


def run(options: argparse.Namespace) -> BenchReport:
    torch.set_num_threads(options.threads)
    ranks = Ranks(device=default_device())
    dtype = PEAK_DTYPES[options.precision]
    before = matmul_peak(ranks.device, dtype, options.peak_size, options.peak_seconds)
    timings, trainer, batch = measure_in_process(options, ranks)
    # Timed again after the rounds: on a shared machine another process can hold the cores during
    # either, and a peak is the best the device did.
    after = matmul_peak(ranks.device, dtype, options.peak_size, options.peak_seconds)
    params, embedding_params, body_params, head_params = parameter_counts(trainer.model)
    del trainer  # frees the model before the ranks load theirs
    if options.ranks > 0:
        timings.append(measure_on_ranks(options))
    return BenchReport(
        model=options.model,
        params=params,
        embedding_params=embedding_params,
        body_params=body_params,
        head_params=head_params,
        device=str(ranks.device),
        threads=options.threads,
        precision=options.precision,
        sequences=len(batch),
        fed_tokens=sum(fed_length(sample) for sample in batch),
        trained_tokens=masked_tokens(batch),
        peak=max(before, after, key=lambda p: p.gflops),
        peaks=(before, after),
        timings=timings,
    )


def verdict(met: bool) -> str:
    return "MET" if met else "NOT MET"


def print_report(report: BenchReport, options: argparse.Namespace) -> None:
    print(f"model {report.model}: {report.params:,} parameters ({report.embedding_params:,} in the input embeddings)")
    ranks_note = f"; the {options.ranks}-rank block {max(1, options.threads // options.ranks)} a rank" if options.ranks > 0 else ""
    print(f"torch {torch.__version__}, device {report.device}, {report.threads} threads{ranks_note}")
    print(
        f"batch: {report.sequences} sequences (prompts {options.prompt_tokens[0]}-{options.prompt_tokens[1]} tokens, "
        f"completions {options.completion_tokens[0]}-{options.completion_tokens[1]}), {report.fed_tokens} fed tokens, "
        f"{report.trained_tokens} trained, seed {options.seed}; 1 AdamW step a batch, {PRECISION_NOTES[report.precision]}"
    )
    peak = report.peak
    print(
        f"matmul peak: {peak.gflops:.1f} GFLOP/s ({peak.size}x{peak.size} {report.precision}, {report.threads} threads; the larger of "
        f"{report.peaks[0].gflops:.1f} before the rounds and {report.peaks[1].gflops:.1f} after, ~{peak.seconds:.1f} s each)"
    )
    print(
        f"{options.rounds} rounds after a warm-up step on {min(options.warmup_sequences, report.sequences)} sequences; "
        "step s is the median; MFU = (6 x body parameters x fed tokens + 6 x head parameters x trained tokens) / step s / peak"
    )
    print(f"{'mode':<26} {'fed tok/s':>10} {'trained tok/s':>14} {'step s':>8} {'MFU':>7}   steps (s)")
    for timing in report.timings:
        steps = ", ".join(f"{s:.2f}" for s in timing.step_seconds)
        print(
            f"{timing.mode.label:<26} {report.fed_per_second(timing):>10.1f} {report.trained_per_second(timing):>14.1f} "
            f"{timing.median_seconds:>8.2f} {report.mfu(timing):>6.1%}   {steps}"
        )
    alone = report.timings[0]
    packed = [t for t in report.timings if t.mode.micro_batch_tokens > 0 and t.mode.ranks == 0]
    for timing in packed:
        print(f"{timing.mode.label} / one at a time: {report.speedup(timing, alone):.2f}x")
    on_ranks = [t for t in report.timings if t.mode.ranks > 0]
    same_budget = next(t for t in packed if t.mode.micro_batch_tokens == min(options.micro_batch_tokens))
    for timing in on_ranks:
        print(
            f"{timing.mode.label} / {same_budget.mode.label}: {report.speedup(timing, same_budget):.2f}x (its own processes, run after the in-process rounds)"
        )
    best = max(packed, key=lambda t: report.speedup(t, alone))
    speedup, mfu = report.speedup(best, alone), report.mfu(best)
    print(f"target: packed >= {PACKED_SPEEDUP_TARGET:g}x one at a time: {best.mode.label} {speedup:.2f}x: {verdict(speedup >= PACKED_SPEEDUP_TARGET)}")
    print(f"target: packed MFU >= {MFU_TARGET:.0%} of the peak: {best.mode.label} {mfu:.1%}: {verdict(mfu >= MFU_TARGET)}")


def main(argv: Sequence[str]) -> int:
    options = parse_options(argv)
    if options.ranks_worker:
        rank_worker(options)
        sys.stdout.flush()
        sys.stderr.flush()
        # Ends the rank without the interpreter's finalization: gloo's threads torn down there
        # abort the process now and then, after the rank's work is done and its result written.
        os._exit(0)
    if not options.random_weights:
        print_report(run(options), options)
        return 0
    with tempfile.TemporaryDirectory(prefix="trainer-bench-model-") as folder:
        print(f"random weights: the architecture of {options.model / 'config.json'}")
        options.model = random_model(options.model, Path(folder))
        print_report(run(options), options)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
