"""The real-model trainer bench (trajflow_py/trainer/bench.py) in-process on the tiny Llama: one round, no ranks."""

from __future__ import annotations

import re

import pytest

from trajflow_py.trainer.bench import main, parse_options, print_report, run, synthetic_batch
from trajflow_py.trainer.packing import fed_length

TINY = ["--sequences", "4", "--rounds", "1", "--prompt-tokens", "10-30", "--completion-tokens", "5-20", "--peak-size", "64", "--peak-seconds", "0.05"]


def test_the_synthetic_batch_trains_every_completion_token_and_is_the_same_for_a_seed():
    batch = synthetic_batch(6, 64, (10, 30), (5, 20), seed=3)
    assert batch == synthetic_batch(6, 64, (10, 30), (5, 20), seed=3)
    for sample in batch:
        prompt = sample.loss_mask.index(1)
        assert 10 <= prompt <= 30
        assert 5 <= len(sample.ids) - prompt <= 20
        assert all(m == 1 for m in sample.loss_mask[prompt:])
        assert sample.advantage in (-1.0, 1.0)
        assert fed_length(sample) == len(sample.ids) - 1


def test_the_bench_times_each_mode_and_reports_figures_from_the_same_numbers(model_dir, capsys):
    options = parse_options(["--model", str(model_dir), *TINY, "--micro-batch-tokens", "48,96", "--ranks", "0"])
    report = run(options)

    assert [t.mode.label for t in report.timings] == ["one at a time", "packed 48", "packed 96"]
    assert all(len(t.step_seconds) == 1 and t.median_seconds > 0 for t in report.timings)
    assert report.peak.gflops == max(p.gflops for p in report.peaks) > 0
    assert report.params == sum(p.numel() for p in _tiny_params(model_dir))
    assert report.sequences == 4
    assert 0 < report.trained_tokens < report.fed_tokens
    alone, packed = report.timings[0], report.timings[2]
    assert report.fed_per_second(alone) == pytest.approx(report.fed_tokens / alone.step_seconds[0])
    flops = 6 * report.body_params * report.fed_tokens + 6 * report.head_params * report.trained_tokens
    assert report.mfu(packed) == pytest.approx(flops / packed.median_seconds / (report.peak.gflops * 1e9))
    assert report.body_params + report.embedding_params == report.params  # the tiny Llama ties its head

    print_report(report, options)
    out = capsys.readouterr().out
    row = re.search(r"^packed 96 +([\d.]+) +([\d.]+) +([\d.]+) +([\d.]+)%", out, re.M)
    assert row is not None, out
    assert float(row[1]) == pytest.approx(report.fed_per_second(packed), abs=0.05)
    assert float(row[2]) == pytest.approx(report.trained_per_second(packed), abs=0.05)
    assert f"packed 96 / one at a time: {report.speedup(packed, alone):.2f}x" in out
    best = max(report.timings[1:], key=lambda t: report.speedup(t, alone))
    assert re.search(rf"^target: packed >= 3x one at a time: {best.mode.label} [\d.]+x: (MET|NOT MET)$", out, re.M)
    assert re.search(r"^target: packed MFU >= 40% of the peak: packed \d+ [\d.]+%: (MET|NOT MET)$", out, re.M)


def test_bad_options_are_refused_by_name(model_dir, capsys):
    with pytest.raises(SystemExit):
        main(["--model", str(model_dir), "--prompt-tokens", "30-10"])
    assert "expected 1 <= MIN <= MAX, got '30-10'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="past the model's 128"):
        main(["--model", str(model_dir), *TINY, "--completion-tokens", "100-120", "--ranks", "0"])


def _tiny_params(model_dir):
    from transformers import AutoModelForCausalLM

    return list(AutoModelForCausalLM.from_pretrained(model_dir).parameters())


def test_random_weights_bench_an_architecture_from_its_config_alone_in_bfloat16(model_dir, tmp_path, capsys):
    config_only = tmp_path / "config-only"
    config_only.mkdir()
    (config_only / "config.json").write_bytes((model_dir / "config.json").read_bytes())

    assert main(["--model", str(config_only), *TINY, "--ranks", "0", "--random-weights", "--precision", "bfloat16"]) == 0

    out = capsys.readouterr().out
    assert f"random weights: the architecture of {config_only / 'config.json'}" in out
    params = sum(p.numel() for p in _tiny_params(model_dir))
    assert re.search(rf"^model \S+: {params:,} parameters", out, re.M), out
    assert "1 AdamW step a batch, bfloat16 compute on float32 master weights" in out
    assert re.search(r"^matmul peak: [\d.]+ GFLOP/s \(64x64 bfloat16, ", out, re.M), out
    assert re.search(r"^packed 1024 +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+%", out, re.M), out
    # Nothing written beside the config.
    assert [p.name for p in config_only.iterdir()] == ["config.json"]
