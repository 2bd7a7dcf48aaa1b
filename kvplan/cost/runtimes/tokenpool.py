"""What TensorRT-LLM and TGI share: a pool of fixed-size pages sized from a per-token estimate, every attention layer
held in full (no sliding-window freeing), a request holding cdiv(L, page) pages, and a budget measured after a
warm-up pass (weights, the warm-up's activation peak and runtime memory already taken).

Each engine's module says how it turns free memory into pages (``TokenPool.pool_tokens``) and how it counts one
token (``TokenPool.token_bytes``); this module applies them to every pipeline stage and takes the minimum.
"""

from __future__ import annotations

from kvplan.cost import features as ft
from kvplan.cost.runtimes.base import Server, rank_row, stage_weights
from kvplan.cost.runtimes.setup import Pool, Setup, Stage
from kvplan.cost.runtimes.results import KVCachePool
from kvplan.errors import KvplanError
from kvplan.units import cdiv, plural


GROWTH_BYTES, GROWTH_MULTI_GPU_BYTES = 256 * 2**20, 512 * 2**20  # non-torch growth: estimates (see below)

class TokenPool(Server):
    """A paged pool sized after a warm-up pass; subclasses give ``token_bytes`` and ``pool_tokens``."""

    paged = True
    single_process = False

    def check_servable(self, card, layout) -> None:
        super().check_servable(card, layout)
        if card.ssm is not None:
            raise KvplanError(f"--engine {self.name}: {card.name}'s state layers (Mamba/linear attention) are not "
                              f"modelled for {self.display_name}; use --engine vllm or sglang")

    def overhead_defaults(self, gpus: int) -> tuple[int, int, int]:
        """(runtime growth, no CUDA-graph term, the CUDA context): both engines capture their graphs after sizing the
        pool, out of the share the fraction leaves. The growth is an ESTIMATE no log of these engines pins: 256 MiB on
        one GPU, 512 MiB with NCCL (the figures kvplan used for vLLM before its logs measured 0.01-0.14 GiB)."""
        from kvplan.cost import serving_vllm as vl

        return (GROWTH_BYTES if gpus == 1 else GROWTH_MULTI_GPU_BYTES), 0, vl.DEFAULT_CONTEXT_BYTES

    # -- what a subclass gives --

    def token_bytes(self, s: Setup, st: Stage) -> int:
        """Bytes one cached token takes on this stage's rank, as the engine counts it."""
        return st.kv_bytes_per_token

    def pool_tokens(self, s: Setup, st: Stage, per_token: int) -> int:
        """Tokens the engine's pool gets from ``st.available``."""
        return st.available // per_token

    def request_tokens(self, s: Setup) -> int:
        """Token slots one request of max_model_len holds, in whole pages."""
        return cdiv(s.max_model_len, s.block_size) * s.block_size

    # -- the budget: free memory after the warm-up pass --

    def free_after_warmup(self, s: Setup, st_weights: int, activation: int) -> int:
        """Device memory minus the CUDA context, the weights, the warm-up's activation peak and runtime growth."""
        return s.total - s.context - st_weights - activation - s.non_torch - s.cuda_graph

    def budget(self, s: Setup, st: Stage) -> int:
        """The bytes the pool may take out of the free memory ``st.available`` (positive)."""
        raise NotImplementedError

    def stage(self, s: Setup, pp_rank: int, parts: list[range]) -> Stage:
        w, specs = stage_weights(s, pp_rank, parts)
        weights, act = w.bytes + w.buffers_bytes, self.activation(s, pp_rank == s.layout.pp - 1)
        free = self.free_after_warmup(s, weights, act)
        st = Stage(pp_rank, w.layers, w.params, weights, w.buffers_bytes, act, s.non_torch, s.cuda_graph,
                   s.total - s.context, free, specs)
        return st.replaced(available=self.budget(s, st)) if free > 0 else st

    def activation(self, s: Setup, last_stage: bool) -> int:
        """The warm-up forward's peak: vLLM's profile-run approximation (kvplan's own) over the warm-up tokens."""
        if s.activation is not None:
            return s.activation
        from kvplan.cost import serving_vllm as vl
        from kvplan.cost.parallel import moe_tp, pad_vocab

        tokens = min(s.mnbt, self.warmup_requests(s) * s.max_model_len)
        act_bytes = s.w_t.activation_bytes
        return vl.profile_activation_bytes(s.card, s.layout.tp, act_bytes, tokens, self.warmup_requests(s),
                                           pad_vocab(s.card.vocab_size), last_stage, moe_tp(s.weight_layout))

    def warmup_requests(self, s: Setup) -> int:
        """Requests of the warm-up batch (one logits row each): its tokens in requests of max_model_len."""
        return min(s.max_num_seqs or s.mnbt, cdiv(s.mnbt, s.max_model_len))

    def activation_estimated(self, s: Setup) -> bool:
        return s.activation is None

    # -- the pool --

    def pool(self, s: Setup, sts: list[Stage]) -> Pool:
        page = s.block_size
        per_req_tokens = self.request_tokens(s)
        rows, per_token = [], []
        for st in sts:
            b = self.token_bytes(s, st)
            tokens = self.pool_tokens(s, st, b) if st.available > 0 else 0
            blocks = tokens // page
            rows.append(rank_row(st, b * page, blocks, min(s.max_model_len, blocks * page)))
            per_token.append(b)
        lim = min(range(len(sts)), key=lambda i: rows[i].num_blocks)  # the engine takes the MIN over ranks
        blocks, per_req = rows[lim].num_blocks, per_req_tokens // page
        pool = KVCachePool(available_bytes=sts[lim].available, block_size=page,
                           bytes_per_block=rows[lim].bytes_per_block, num_blocks=blocks, tokens=blocks * page,
                           groups=1, padding_layers=0, blocks_per_request=per_req)
        shared = ft.shared_blocks(s.opts.shared_prefix_len, s.max_model_len, page) if s.opts.shared_prefix_len else 0
        conc = ft.concurrency_with_prefix(blocks, per_req, shared)  # prefix reuse: full blocks held once
        return Pool(sts[lim], pool, conc, per_req_tokens * per_token[lim], blocks >= per_req,
                    min(r.max_model_len_fit for r in rows), rows)

    running_limit_flag = "--max_batch_size"

    def running_limit(self, s: Setup, p: Pool) -> int | None:
        return s.max_num_seqs

    def pool_summary(self, p: Pool, s: Setup) -> str:
        return f" ({p.pool.num_blocks:,} blocks of {plural(s.block_size, 'token')})"


def unverified(engine: str, what: str) -> str:
    """The note a rule carries when no published log pins it."""
    return (f"{engine}: {what} follow the engine's source (named in kvplan.cost.runtimes); no published start-up "
            "log with all its inputs pins them, so they are UNVERIFIED against a real run.")
