"""Prefill, one decode step, and the cache-free full forward the first two must agree with."""

from __future__ import annotations

import torch
from torch import Tensor

from kvplan.verify.reference.model import Reference, Step


@torch.no_grad()
def prefill(model: Reference, tokens: Tensor, caches, *, last_only: bool = False,
            enc_tokens: Tensor | None = None) -> Tensor:
    """Run the prompt (B, P) through the model, filling the caches. Logits (B, P, V), or (B, 1, V) last_only."""
    enc = model.encode(enc_tokens) if model.encoder is not None else None
    pos = torch.arange(tokens.shape[1], device=tokens.device)
    return model(tokens, Step("prefill", 0, pos, last_only, enc), caches)


@torch.no_grad()
def decode_step(model: Reference, token: Tensor, pos: int, caches) -> Tensor:
    """One new token (B, 1) at position ``pos``, attending the cache. Logits (B, 1, V)."""
    return model(token, Step("decode", pos, torch.arange(pos, pos + 1, device=token.device)), caches)


@torch.no_grad()
def forward_full(model: Reference, tokens: Tensor, enc_tokens: Tensor | None = None) -> Tensor:
    """No cache: every position attends its causal (windowed) prefix directly. Logits (B, T, V)."""
    enc = model.encode(enc_tokens) if model.encoder is not None else None
    pos = torch.arange(tokens.shape[1], device=tokens.device)
    return model(tokens, Step("full", 0, pos, False, enc))


@torch.no_grad()
def greedy(model: Reference, prompt: Tensor, caches, steps: int, *,
           enc_tokens: Tensor | None = None) -> tuple[Tensor, list[Tensor]]:
    """Prefill then ``steps`` greedy decode steps: (all tokens (B, P + steps), [prefill logits, step logits...])."""
    logits = [prefill(model, prompt, caches, enc_tokens=enc_tokens)]
    tokens = prompt
    for i in range(steps):
        nxt = logits[-1][:, -1:].argmax(-1)  # (B, 1)
        tokens = torch.cat([tokens, nxt], dim=1)
        logits.append(decode_step(model, nxt, prompt.shape[1] + i, caches))
    return tokens, logits
