"""
Next-token sampling for a batch of rows, each row with its own parameters and random stream.

Two properties matter more than speed:

- Batch independence: a row's token depends only on its own logits, its own parameters and one
  uniform number drawn from its own generator (each row is sampled by itself, and which code path
  it takes depends on nothing else), so the same seed and prompt give the same tokens in any batch.
- SGLang's logprob definition: the reported logprob of a sampled token is
  log_softmax(logits / temperature) over the whole vocabulary, computed in float32: after
  temperature, before top-k / top-p truncation. The trainer recomputes exactly this quantity.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

# SGLang treats a temperature below this as greedy decoding (top_k = 1 at temperature 1).
GREEDY_TEMPERATURE_EPS = 1e-6


@dataclass(frozen=True)
class RowSampling:
    """One row's effective sampling parameters (greedy already folded into top_k = 1)."""

    temperature: float
    top_p: float
    # 0 = no top-k limit.
    top_k: int

    @staticmethod
    def from_request(temperature: float, top_p: float, top_k: int) -> RowSampling:
        """Maps request parameters (top_k -1 = disabled) to the effective ones, as SGLang does."""
        if temperature < GREEDY_TEMPERATURE_EPS:
            return RowSampling(temperature=1.0, top_p=1.0, top_k=1)
        return RowSampling(temperature=temperature, top_p=top_p, top_k=0 if top_k < 0 else top_k)


def draw_uniform(generator: torch.Generator) -> float:
    """The one random number a row consumes per sampled token."""
    return float(torch.rand(1, generator=generator, dtype=torch.float64).item())


# How many top candidates a truncated row fetches with topk before falling back to a full sort
# (needed only when the nucleus is wider than this): selecting a few hundred candidates costs far
# less than sorting the whole vocabulary.
TOP_CANDIDATES = 512


def sample_tokens(logits: torch.Tensor, rows: list[RowSampling], uniforms: list[float]) -> tuple[list[int], list[float]]:
    """
    Samples one token per row of `logits` [batch, vocab] by inverse CDF on the row's top-k / top-p
    truncated distribution, using `uniforms[i]` in [0, 1) for row i.

    Returns the tokens and their logprobs log_softmax(logits / T) (untruncated, float32).
    """
    batch = logits.shape[0]
    if len(rows) != batch or len(uniforms) != batch:
        raise ValueError(f"{batch} logit rows but {len(rows)} parameter rows and {len(uniforms)} uniforms")
    temperatures = torch.tensor([r.temperature for r in rows], dtype=torch.float32)
    logprobs = torch.log_softmax(logits.float() / temperatures[:, None], dim=-1)
    probs = logprobs.exp()
    tokens = [_sample_row(probs[i], rows[i], uniforms[i]) for i in range(batch)]
    return tokens, [float(logprobs[i, token]) for i, token in enumerate(tokens)]


def _sample_row(probs: torch.Tensor, row: RowSampling, u: float) -> int:
    """One row: which path it takes depends on its own parameters and values only."""
    vocab = probs.shape[0]
    if row.top_k == 0 and row.top_p >= 1.0:
        # Untruncated: inverse CDF in vocabulary order, no sort needed.
        return _inverse_cdf(probs, None, u)

    k = min(row.top_k or vocab, vocab)
    values, ids = torch.topk(probs, min(k, TOP_CANDIDATES))
    # The candidates suffice unless top-k wants more of them, or the nucleus may reach past them.
    need_more = len(values) < k and (row.top_p >= 1.0 or float(values.sum()) <= row.top_p)
    if need_more:
        values, ids = torch.sort(probs, stable=True, descending=True)
        values, ids = values[:k], ids[:k]
    if row.top_p < 1.0:
        # SGLang's rule: a token stays if the mass strictly before it is at most top_p.
        mass_before = values.cumsum(dim=0) - values
        kept = int((mass_before <= row.top_p).sum())
        values, ids = values[: max(kept, 1)], ids[: max(kept, 1)]
    return _inverse_cdf(values, ids, u)


def _inverse_cdf(values: torch.Tensor, ids: torch.Tensor | None, u: float) -> int:
    # float64 so the threshold comparison is not where rounding bites.
    cdf = values.double().cumsum(dim=0)
    threshold = torch.tensor([u * float(cdf[-1])], dtype=torch.float64)
    index = min(int(torch.searchsorted(cdf, threshold, right=True)), len(values) - 1)
    return index if ids is None else int(ids[index])
