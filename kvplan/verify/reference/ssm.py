"""The reference model's state-space mixer (Mamba-1 / Mamba-2) and its per-sequence states."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from kvplan.model.card import ModelCard
from kvplan.verify.reference.cache import state_layout

class SSMixer(nn.Module):
    """A state-space mixer: Mamba-1 (selective scan, arXiv:2312.00752; Jamba's dt/B/C RMSNorms with dt_bc_norms) or
    Mamba-2 (SSD, arXiv:2405.21060), with transformers' MambaMixer / Mamba2Mixer parameter shapes (kvplan.cost.ssm). The scan is the naive sequential
    recurrence (prefill and full passes: one step per token; decode: one step from the cached state); the depthwise
    causal conv1d is computed from its last d_conv - 1 inputs (cached between steps). Both are elementwise, so
    FlopCounterMode sees only the projections' matmuls.

    Cache (kvplan.verify.reference.cache.StateCache): ``conv`` (B, conv_dim, width) the last conv inputs, ``ssm``
    the recurrent state (B, I, N) or (B, H, P, N) in the engine's state dtype, which the recurrence runs in."""

    def __init__(self, card: ModelCard, *, engine: str, dtype, device) -> None:
        super().__init__()
        s, h = card.ssm, card.hidden_size
        kw = dict(dtype=dtype, device=device)
        inner, C = s.intermediate_size, s.conv_dim
        self.s, self.kind = s, s.kind
        self.state_dtype = state_layout(card, engine, dtype)[1]
        self.conv1d = nn.Conv1d(C, C, s.d_conv, groups=C, bias=s.conv_bias, **kw)  # weight (C, 1, K)
        if s.kind == "mamba":
            self.in_proj = nn.Linear(h, 2 * inner, bias=s.proj_bias, **kw)  # x, z
            self.x_proj = nn.Linear(inner, s.dt_rank + 2 * s.d_state, bias=False, **kw)  # dt, B, C
            self.dt_proj = nn.Linear(s.dt_rank, inner, bias=True, **kw)
            self.A_log = nn.Parameter(torch.zeros(inner, s.d_state, **kw))
            self.D = nn.Parameter(torch.zeros(inner, **kw))
            if s.dt_bc_norms:  # Jamba (JambaMambaMixer): RMSNorms on dt, B and C after x_proj
                self.dt_norm = nn.RMSNorm(s.dt_rank, eps=1e-6, **kw)
                self.b_norm = nn.RMSNorm(s.d_state, eps=1e-6, **kw)
                self.c_norm = nn.RMSNorm(s.d_state, eps=1e-6, **kw)
        else:
            self.in_proj = nn.Linear(h, inner + C + s.num_heads, bias=s.proj_bias, **kw)  # z, (x, B, C), dt
            self.dt_bias = nn.Parameter(torch.zeros(s.num_heads, **kw))
            self.A_log = nn.Parameter(torch.zeros(s.num_heads, **kw))
            self.D = nn.Parameter(torch.zeros(s.num_heads, **kw))
            self.norm = nn.RMSNorm(inner, eps=1e-6, **kw)  # gated: norm(y * silu(z))
        self.out_proj = nn.Linear(inner, h, bias=s.proj_bias, **kw)

    def conv(self, u: Tensor, step, cache) -> Tensor:
        """Causal depthwise conv1d + SiLU over u (B, T, C); reads and updates the cached last inputs."""
        B, _, C = u.shape
        K = self.s.d_conv
        u = u.transpose(1, 2)  # (B, C, T)
        if cache is not None and step.mode == "decode":
            prev = cache.conv[..., cache.conv.shape[-1] - (K - 1):].to(u.dtype)
        else:  # inputs before position 0 are zero
            prev = u.new_zeros(B, C, K - 1)
        xpad = torch.cat([prev, u], dim=-1)  # (B, C, K - 1 + T)
        if cache is not None:
            cache.conv.copy_(xpad[..., xpad.shape[-1] - cache.conv.shape[-1]:])
        y = (xpad.unfold(-1, K, 1) * self.conv1d.weight[:, 0, None, :]).sum(-1)  # (B, C, T)
        if self.conv1d.bias is not None:
            y = y + self.conv1d.bias[:, None]
        return F.silu(y).transpose(1, 2)  # (B, T, C)

    def scan(self, decay: Tensor, inject: Tensor, readout: Tensor, step, cache) -> Tensor:
        """s_t = decay_t * s_{t-1} + inject_t; y_t = sum_N s_t * readout_t, over T steps (dim 1)."""
        T = decay.shape[1]
        sd = self.state_dtype
        if cache is not None and step.mode == "decode":
            s = cache.ssm.clone()
        else:
            s = torch.zeros(inject.shape[:1] + inject.shape[2:], dtype=sd, device=inject.device)
        ys = []
        for t in range(T):
            s = s * decay[:, t].to(sd) + inject[:, t].to(sd)
            ys.append((s * readout[:, t].to(sd)).sum(-1).to(decay.dtype))
        if cache is not None:
            cache.ssm.copy_(s)
        return torch.stack(ys, dim=1)

    def forward(self, x: Tensor, step, cache, bias_fn) -> Tensor:
        B, T, _ = x.shape
        s = self.s
        inner, N = s.intermediate_size, s.d_state
        if self.kind == "mamba":
            u, z = self.in_proj(x).split([inner, inner], dim=-1)
            u = self.conv(u, step, cache)  # (B, T, I)
            dt, Bm, Cm = self.x_proj(u).split([s.dt_rank, N, N], dim=-1)
            if s.dt_bc_norms:
                dt, Bm, Cm = self.dt_norm(dt), self.b_norm(Bm), self.c_norm(Cm)
            dt = F.softplus(self.dt_proj(dt))[..., None]  # (B, T, I, 1)
            A = -torch.exp(self.A_log)  # (I, N)
            y = self.scan(torch.exp(dt * A), dt * u[..., None] * Bm[:, :, None, :], Cm[:, :, None, :], step, cache)
            y = (y + self.D * u) * F.silu(z)
            return self.out_proj(y)
        H, P, G = s.num_heads, s.head_dim, s.n_groups
        z, xbc, dt = self.in_proj(x).split([inner, s.conv_dim, H], dim=-1)
        u, Bm, Cm = self.conv(xbc, step, cache).split([inner, G * N, G * N], dim=-1)
        u = u.view(B, T, H, P)
        Bm = Bm.view(B, T, G, N).repeat_interleave(H // G, dim=2)[:, :, :, None, :]  # (B, T, H, 1, N)
        Cm = Cm.view(B, T, G, N).repeat_interleave(H // G, dim=2)[:, :, :, None, :]
        dt = F.softplus(dt + self.dt_bias)[..., None, None]  # (B, T, H, 1, 1)
        A = -torch.exp(self.A_log)[:, None, None]  # (H, 1, 1)
        y = self.scan(torch.exp(dt * A), dt * u[..., None] * Bm, Cm, step, cache)  # (B, T, H, P)
        y = (y + self.D[:, None] * u).reshape(B, T, inner)
        return self.out_proj(self.norm(y * F.silu(z)))
