"""Unit tests of the model server's sampler: truncation rules, logprob definition, batch independence."""

import math

import torch

from trajflow_py.model_server.sampling import TOP_CANDIDATES, RowSampling, draw_uniform, sample_tokens


def _logits_for(probs: list[float], vocab: int = 64) -> torch.Tensor:
    """Logits whose softmax puts `probs` on the first tokens and a negligible rest elsewhere."""
    logits = torch.full((vocab,), -60.0)
    logits[: len(probs)] = torch.log(torch.tensor(probs))
    return logits


def test_logprob_is_log_softmax_after_temperature_before_top_p():
    torch.manual_seed(0)
    logits = torch.randn(3, 100) * 3
    rows = [RowSampling(0.7, 0.5, 0), RowSampling(1.3, 1.0, 5), RowSampling(1.0, 0.9, 0)]
    tokens, logprobs = sample_tokens(logits, rows, [0.1, 0.5, 0.9])
    for i, (row, token) in enumerate(zip(rows, tokens, strict=True)):
        expected = torch.log_softmax(logits[i] / row.temperature, dim=-1)[token]
        assert math.isclose(logprobs[i], float(expected), abs_tol=1e-6)


def test_greedy_picks_argmax_and_reports_temperature_one_logprob():
    torch.manual_seed(1)
    logits = torch.randn(1, 500)
    row = RowSampling.from_request(temperature=0.0, top_p=0.3, top_k=-1)
    assert row == RowSampling(1.0, 1.0, 1)
    tokens, logprobs = sample_tokens(logits, [row], [0.999])
    assert tokens == [int(logits[0].argmax())]
    assert math.isclose(logprobs[0], float(torch.log_softmax(logits[0], -1).max()), abs_tol=1e-6)


def test_top_p_keeps_the_smallest_prefix_reaching_the_mass():
    # Masses before each token: 0, 0.5, 0.8, 0.95. With top_p 0.7 tokens 0 and 1 stay.
    logits = _logits_for([0.5, 0.3, 0.15, 0.05])[None, :]
    row = RowSampling(1.0, 0.7, 0)
    uniforms = [i / 200 for i in range(200)]
    picks = [sample_tokens(logits, [row], [u])[0][0] for u in uniforms]
    assert set(picks) == {0, 1}
    # Renormalised over the nucleus: token 0 gets 0.5 / 0.8 of the uniform range.
    assert abs(picks.count(0) / len(picks) - 0.625) < 0.01


def test_top_k_limits_candidates():
    logits = _logits_for([0.4, 0.3, 0.2, 0.1])[None, :]
    picks = {sample_tokens(logits, [RowSampling(1.0, 1.0, 2)], [i / 50])[0][0] for i in range(50)}
    assert picks == {0, 1}


def test_untruncated_sampling_follows_the_distribution():
    logits = _logits_for([0.6, 0.3, 0.1])[None, :]
    generator = torch.Generator().manual_seed(3)
    counts = [0, 0, 0]
    for _ in range(3000):
        token = sample_tokens(logits, [RowSampling(1.0, 1.0, 0)], [draw_uniform(generator)])[0][0]
        counts[token] += 1
    for count, p in zip(counts, [0.6, 0.3, 0.1], strict=True):
        assert abs(count / 3000 - p) < 0.03


def test_a_nucleus_wider_than_the_topk_probe_falls_back_to_a_full_sort():
    vocab = TOP_CANDIDATES * 4
    logits = torch.zeros(1, vocab)  # uniform: top_p 0.9 keeps 90% of the vocabulary
    picks = [sample_tokens(logits, [RowSampling(1.0, 0.9, 0)], [i / 400])[0][0] for i in range(400)]
    # The stable sort keeps equal probabilities in vocabulary order, so the nucleus is a prefix.
    assert max(picks) > TOP_CANDIDATES
    assert max(picks) <= 0.9 * vocab
    assert len(set(picks)) == 400


def test_a_row_samples_the_same_token_whatever_else_is_in_the_batch():
    torch.manual_seed(2)
    logits = torch.randn(6, 1000) * 2
    settings = [(1.0, 1.0, 0), (0.8, 0.9, 0), (1.0, 1.0, 7), (1.0, 1.0, 1), (1.2, 0.5, 40), (1.0, 0.95, 0)]
    rows = [RowSampling(*setting) for setting in settings]
    uniforms = [0.11, 0.52, 0.73, 0.34, 0.95, 0.06]
    together, together_lp = sample_tokens(logits, rows, uniforms)
    for i in range(6):
        alone, alone_lp = sample_tokens(logits[i : i + 1], rows[i : i + 1], uniforms[i : i + 1])
        assert alone == [together[i]]
        assert math.isclose(alone_lp[0], together_lp[i], abs_tol=1e-6)


def test_the_same_seed_draws_the_same_uniforms():
    a, b = torch.Generator().manual_seed(42), torch.Generator().manual_seed(42)
    assert [draw_uniform(a) for _ in range(5)] == [draw_uniform(b) for _ in range(5)]
