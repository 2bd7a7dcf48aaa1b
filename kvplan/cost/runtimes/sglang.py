"""SGLang: a token pool (page size 1 by default) sized from ``--mem-fraction-static``, no profile run.

The formulas, each with its SGLang source, are in ``kvplan.cost.serving_sglang`` (the rules of
``serving_sglang.RULES``); this runtime applies them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.cost import serving_sglang as sg
from kvplan.cost.engines import CacheRun
from kvplan.cost.runtimes.base import Server, VersionRange, at_range, rank_row, stage_weights
from kvplan.cost.runtimes.setup import Options, Pool, ServingFlags, Setup, Stage
from kvplan.cost.runtimes.vllm import dtype_flags
from kvplan.errors import KvplanError, Refused
from kvplan.units import MAX_BLOCK_TOKENS, cdiv, fmt_bytes, fmt_int, require_fraction, require_positive


def running_cap(opts) -> int | None:
    """max_running_requests as SGLang reads it: as given, else 48 with speculative decoding (server_args.py
    __post_init__: serving_sglang.SPEC_MAX_RUNNING_REQUESTS), else None (resolve_max_num_reqs' estimate)."""
    if opts.max_running_requests is not None:
        return opts.max_running_requests
    return sg.SPEC_MAX_RUNNING_REQUESTS if opts.speculative is not None else None


@dataclass(frozen=True)
class SglangVersion(VersionRange):
    """The rules that differ between SGLang releases; one object per modelled range, named in a plan's rules. Each
    range was read in the release's PyPI wheel (srt/server_args.py, srt/arg_groups/memory_hook.py,
    srt/layers/rotary_embedding.py, srt/models/qwen3_vl.py)."""

    label: str
    first: tuple[int, int, int]
    last: tuple[int, int, int] | None
    # the default mem_fraction_static: "tp" (sg.mem_fraction_by_tp), "0.4.6", "0.4.7" (sg.mem_fraction_0_4_6 / _7),
    # "tiers" (sg.mem_fraction_by_tier), "reserved" (sg.default_mem_fraction_static)
    mfs_rule: str
    reserves_prefill_graphs: bool  # the reserved default counts piecewise prefill CUDA graphs (on by default)
    rope_cache_fp32: bool  # the rotary cos/sin cache stays float32 on CUDA (sglang PR 3134, 0.4.2; sg.rope_cache_bytes)
    mid_tier: tuple[int, int, int] = sg.MID_TIER_0_5_20  # the reserved default's 20 - 35 GiB GPU tier
    # the hybrid sliding-window pool (serving_sglang.hybrid_swa_tokens): the architectures that get it by default
    # (as the range's releases decide it: serving_sglang's HYBRID_SWA_ARCHITECTURES_*; empty: none), how the pool is
    # split (serving_sglang.SWA_SPLITS: "cell" 0.5.11+, "capacity" 0.5.9-0.5.10, "layers" 0.4.10-0.5.8) and what a
    # request is charged in the sliding pool at admission (serving_sglang.SWA_CHARGES, swa_tokens_per_request:
    # "whole" before 0.5.11, "window_floor" 0.5.11-0.5.16, "window" 0.5.17+)
    swa_architectures: frozenset[str] = frozenset()
    swa_split: str = "cell"
    swa_charge: str = "window"
    # 0.5.16+ (schedule_policy.py _swa_chunk_cap): a request whose charge the sliding pool cannot meet is admitted with
    # a smaller prefill chunk, so it needs only the window it keeps (0.5.16-0.5.17 whenever the free tokens fall
    # short, 0.5.18+ when the whole pool does: _swa_req_never_fits); before, it waits for the charge
    swa_chunk_shrink: bool = True
    # 0.5.20+ (pool_configurator.py validate_swa_pool_size): start-up refuses a sliding pool of at most the window + a
    # page
    swa_pool_check: bool = True
    # architectures the release gives one pool after all (server_args.py _handle_model_specific_adjustments, 0.5.8 -
    # 0.5.9: "Disable hybrid SWA memory for GPT-OSS model with trtllm_mha attention backend"; 0.5.8 also "... with
    # speculative decoding")
    swa_single_under_trtllm_mha: frozenset[str] = frozenset()
    swa_single_with_speculative: frozenset[str] = frozenset()
    # the trtllm_mha attention backend on Blackwell (SM100), which takes these page sizes and changes any other to 64
    # ("TensorRT-LLM MHA only supports page_size of 16, 32 or 64, changing page_size from None to 64"; 128 joins in
    # 0.5.17); empty: never the default (the page size stays 1). Whose default it is: ``trtllm_mha_architectures``
    # None: every model without MLA (0.5.7+: serving_sglang.trtllm_mha_default) but the state-space hybrids the
    # release's model-specific adjustments give another backend on SM100 first: ``trtllm_mha_exceptions`` always,
    # ``trtllm_mha_spec_exceptions`` unless speculative decoding is on (0.5.10+: serving_sglang.TRTLLM_MHA_*); a set:
    # those families only (0.5.1-0.5.6: serving_sglang.TRTLLM_MHA_ARCHITECTURES_*)
    trtllm_mha_pages: tuple[int, ...] = ()
    trtllm_mha_architectures: frozenset[str] | None = None
    trtllm_mha_exceptions: frozenset[str] = frozenset()
    trtllm_mha_spec_exceptions: frozenset[str] = frozenset()
    # the architectures whose MLA models get trtllm_mla on SM100 when no attention backend is given (0.5.4+:
    # serving_sglang.TRTLLM_MLA_ARCHITECTURES_*); empty: none
    trtllm_mla_architectures: frozenset[str] = frozenset()
    # the default mem_fraction_static's speculative-decoding reserve (serving_sglang.SPEC_RESERVES: "any" 0.4.8 -
    # 0.5.2, "eagle_2g" 0.5.3 - 0.5.9, "eagle_4g" 0.5.10 - 0.5.13, "" otherwise)
    spec_reserve: str = ""
    # where the release sets speculative decoding's max_running_requests of 48 (serving_sglang.
    # SPEC_MAX_RUNNING_REQUESTS): server_args.py before 0.5.13, arg_groups/speculative_hook.py from 0.5.13 (read in
    # 0.5.12 and 0.5.13: "Max running requests is reset to 48 for speculative decoding")
    spec_running_source: str = "arg_groups/speculative_hook.py"
    # a draft tree (top-k > 1) with pages of more than one token is taken only on the attention backends the release
    # names (0.5.3+, 0.5.4 read: SGLang._spec_backend); before, 0.4.9 - 0.5.2 take it and 0.4.8 makes it a chain
    spec_tree_page_check: bool = True
    # the default mem_fraction_static's multimodal cut (serving_sglang.vlm_mem_fraction, 0.4.10+); whether a config
    # with a text sub-config counts as multimodal (has_multimodal_subconfig, 0.5.10+)
    vlm_mfs: bool = True
    vlm_subconfig: bool = True
    # resolve_max_num_reqs caps max_running_requests at max_mamba_cache_size // 3 (0.5.4+;
    # serving_sglang.mamba_ratio); the state pool keeps a padding slot (0.5.17+; serving_sglang.mamba_split)
    mamba_running_cap: bool = True
    mamba_padding_slot: bool = True
    # at PP > 1 every stage charges a slot the largest stage's share of the model's states (0.5.17+:
    # _handle_max_mamba_cache's pp_layer_scale); before, the whole model's (mamba_cache_per_req over every state
    # layer, read in 0.5.4 - 0.5.16), though each stage allocates only its own layers
    mamba_stage_share: bool = True
    # the state-space hybrids whose radix cache the release turns off (0.5.3 - 0.5.6: serving_sglang.
    # MAMBA_RADIX_OFF_ARCHITECTURES_0_5_4), as --disable-radix-cache does for any hybrid: the state pool sized by count
    # (serving_sglang.mamba_count_size: 512 requests without --max-running-requests) and a running cap of
    # max_mamba_cache_size // 1
    mamba_radix_off: frozenset[str] = frozenset()
    # how --max-mamba-cache-size, and --max-running-requests without the radix cache, size the state pool
    # (serving_sglang.MAMBA_SIZE_RULES; "": no --max-mamba-cache-size, before 0.5.3)
    mamba_sizes: str = "given"
    # how speculative decoding's intermediate draft states (speculative_num_draft_tokens copies of a slot's states)
    # come out of the pool before the K/V token pool (serving_sglang.MAMBA_SPEC_RULES, handle_max_mamba_cache)
    mamba_spec: str = "joint_padded"
    # the spelling of the mamba strategy flag ("": none, before 0.5.7; --mamba-scheduler-strategy 0.5.7 - 0.5.13) and
    # whether an explicit no_buffer needs --disable-overlap-schedule (0.5.14+, server_args.py _validate_mamba_no_buffer,
    # from 0.5.19 arg_groups/mamba_hook.py validate_mamba_no_buffer: "no_buffer do not support overlap schedule";
    # before, _handle_mamba_radix_cache turns the overlap scheduler off itself; read in 0.5.10 and 0.5.14 - 0.5.23)
    mamba_strategy_flag: str = "--mamba-radix-cache-strategy"
    no_buffer_overlap_off: bool = True
    # the hybrids whose mamba radix cache strategy "auto" becomes extra_buffer (0.5.14+:
    # serving_sglang.MAMBA_EXTRA_BUFFER_ARCHITECTURES_*): each request holds its track buffers too
    # (serving_sglang.mamba_tracking_slots); an explicit extra_buffer is modelled for these alone
    mamba_extra_buffer: frozenset[str] = frozenset()
    # 0.5.7 only (model_runner_kv_cache_mixin.py resolve_max_num_reqs): the ratio takes MAMBA_CACHE_V2_ADDITIONAL_RATIO
    # _OVERLAP = 2 whenever the extra_buffer is not on with speculative decoding, no_buffer included ("if
    # enable_mamba_extra_buffer() and not spec_algorithm.is_none(): NO_OVERLAP; else: OVERLAP"); 0.5.8 gates it on
    # enable_mamba_extra_buffer() (read in 0.5.7, 0.5.8, 0.5.9). No slot is taken: only the cap is lower
    mamba_no_buffer_ratio_extra: int = 0
    # how a given --max-running-requests becomes the running cap (serving_sglang.GIVEN_RUNNING_RULES)
    given_running: str = "half_tokens"
    # a Qwen3-VL / Qwen3.5 vision tower (srt/models/qwen3_vl.py Qwen3VLMoeVisionModel.__init__, read in every wheel
    # 0.5.3 - 0.5.23; Qwen3-VL is not in SGLang before 0.5.3): its own rotary cos/sin cache of 8192 positions (get_rope,
    # 0.5.7+; transformers' Qwen2_5_VisionRotaryEmbedding, no cache, 0.5.3 - 0.5.6: serving_sglang.
    # rope_buffers_model_dtype) and its position table split over TP (VocabParallelEmbedding 0.5.8+; nn.Embedding,
    # whole on every rank, 0.5.3 - 0.5.7: serving_sglang.position_table_saving)
    qwen3_vl_tower_rope: bool = True
    qwen3_vl_split_positions: bool = True

    # speculative decoding on a hybrid under the no_buffer strategy (what "auto" becomes 0.5.7 - 0.5.13) with the radix
    # cache on: "radix_off" turns the radix cache off (0.5.8: NemotronHForCausalLM alone, server_args.py
    # _handle_model_specific_adjustments "Disabling radix cache since speculative decoding for NemotronHForCausalLM is
    # not supported with radix cache yet"; 0.5.9: every hybrid through _handle_mamba_radix_cache, "... for
    # {model_arch} ..."), "refuse": 0.5.10 - 0.5.13 _handle_mamba_radix_cache raises ValueError ("Speculative decoding
    # for {model_arch} is not compatible with radix cache when using --mamba-scheduler-strategy no_buffer") on CUDA;
    # "": neither (before 0.5.8; 0.5.14+, read in 0.5.14 - 0.5.23)
    mamba_spec_no_buffer: str = ""
    mamba_spec_no_buffer_archs: frozenset[str] | None = None  # None: every hybrid

    def mamba_spec_no_buffer_rule(self, card, opts) -> str:
        """This release's mamba_spec_no_buffer rule ("radix_off", "refuse") where it meets ``card``: a state-space
        hybrid under speculative decoding with the radix cache on and the no_buffer strategy (``opts``: Options'
        speculative, radix_disabled, mamba_strategy); "" where it does not."""
        hit = (card.ssm is not None and opts is not None and opts.speculative is not None
               and not opts.radix_disabled and card.hf_architecture not in self.mamba_radix_off
               and opts.mamba_strategy != "extra_buffer"
               and (self.mamba_spec_no_buffer_archs is None or card.hf_architecture in self.mamba_spec_no_buffer_archs))
        return self.mamba_spec_no_buffer if hit else ""

    def mamba_radix(self, card, opts=None) -> bool:
        """This release keeps the radix cache on (MambaRadixCache) for a state-space hybrid ``card``: not with
        --disable-radix-cache (``opts.radix_disabled``), nor for the architectures it turns it off for itself, nor
        where speculative decoding turns it off (mamba_spec_no_buffer "radix_off")."""
        if self.mamba_spec_no_buffer_rule(card, opts) == "radix_off":
            return False
        return not (opts is not None and opts.radix_disabled) and card.hf_architecture not in self.mamba_radix_off

    def mamba_tracking(self, card, pp: int, opts=None) -> int:
        """The extra_buffer track slots a request of ``card`` holds beside its state slot in this release (0:
        no_buffer, or no radix cache): the given --mamba-radix-cache-strategy (``opts.mamba_strategy``), else auto's
        choice; the overlap scheduler, on by default, is off at PP > 1."""
        strategy = opts.mamba_strategy if opts is not None else None
        extra = self.mamba_radix(card, opts) and (
            strategy == "extra_buffer" or (strategy in (None, "auto") and card.hf_architecture in self.mamba_extra_buffer))
        return sg.mamba_tracking_slots(extra, overlap=pp == 1)

    def mamba_ratio(self, card, pp: int, opts=None) -> int:
        """resolve_max_num_reqs' ratio for ``card`` (serving_sglang.mamba_ratio): 1 without the radix cache, else
        3 + the track slots (+ 2 for no_buffer too in 0.5.7)."""
        if not self.mamba_radix(card, opts):
            return 1
        return sg.mamba_ratio(True, self.mamba_tracking(card, pp, opts) or self.mamba_no_buffer_ratio_extra)

    def mamba_count(self, card, opts) -> int | None:
        """max_mamba_cache_size where this release sizes ``card``'s state pool by count (serving_sglang.
        mamba_count_size: --max-mamba-cache-size, --max-running-requests without the radix cache, 512); None: by
        memory (mamba_split)."""
        # max_running_requests as handle_max_mamba_cache reads it (set in __post_init__ before)
        return sg.mamba_count_size(self.mamba_sizes or "radix_off", self.mamba_radix(card, opts),
                                   opts.max_mamba_cache_size, running_cap(opts))

    def is_multimodal(self, card) -> bool:
        """configs/model_config.py is_multimodal, as this release decides it by default (serving_sglang's comment
        above VLM_LISTED_ARCHITECTURES)."""
        arch = card.hf_architecture
        if card.vision is None or arch in sg.MM_DISABLED_ARCHITECTURES:
            return False
        return arch in sg.VLM_LISTED_ARCHITECTURES or self.vlm_subconfig

    def uses_trtllm_mha(self, gpu, card, speculative: bool, eagle_topk: int | None) -> bool:
        """This release serves ``card`` on ``gpu`` with trtllm_mha when no attention backend is given."""
        if not self.trtllm_mha_pages:
            return False
        if self.trtllm_mha_architectures is not None:  # a family's own branch: SM100 alone decides
            return (card.hf_architecture in self.trtllm_mha_architectures
                    and sg.sm100(gpu.vendor, gpu.compute_capability))
        # the exceptions are hybrids with state layers (GraniteMoeHybridForCausalLM only "if has_mamba": Granite 4.0
        # Micro, all attention, keeps trtllm_mha)
        arch = card.hf_architecture
        excepted = card.state_layers > 0 and (arch in self.trtllm_mha_exceptions
                                              or (arch in self.trtllm_mha_spec_exceptions and not speculative))
        return not excepted and sg.trtllm_mha_default(gpu.vendor, gpu.compute_capability, card.mla is not None,
                                                      speculative, eagle_topk)

    def uses_trtllm_mla(self, gpu, card) -> bool:
        """This release serves ``card`` (MLA) on ``gpu`` with trtllm_mla when no attention backend is given
        (trtllm_mla_architectures: serving_sglang.TRTLLM_MLA_ARCHITECTURES_*)."""
        return (card.mla is not None and card.hf_architecture in self.trtllm_mla_architectures
                and sg.sm100(gpu.vendor, gpu.compute_capability))

    def default_mfs(self, gpu_mem_mib: int, tp: int, pp: int, mla: bool, cuda: bool, speculative: str | None = None,
                    vision: tuple[int, int] | None = None) -> float:
        """SGLang's mem_fraction_static when --mem-fraction-static is not given, as this release computes it;
        ``speculative`` the --speculative-algorithm (its reserve: serving_sglang.speculative_reserve_mib), ``vision``
        a multimodal model's (vision layers, vision hidden size) (serving_sglang.vlm_mem_fraction)."""
        if self.mfs_rule == "tp":
            return sg.mem_fraction_by_tp(tp)
        if self.mfs_rule == "0.4.6":
            return sg.mem_fraction_0_4_6(gpu_mem_mib, tp)
        if self.mfs_rule == "0.4.7":
            return sg.mem_fraction_0_4_7(gpu_mem_mib, tp, pp, cuda)
        spec = sg.speculative_reserve_mib(self.spec_reserve, speculative)
        if self.mfs_rule == "tiers":
            mfs = sg.mem_fraction_by_tier(gpu_mem_mib, tp, pp, spec)
        else:
            mfs = sg.default_mem_fraction_static(gpu_mem_mib, tp, pp, mla, self.reserves_prefill_graphs,
                                                 self.mid_tier, spec)
        return sg.vlm_mem_fraction(mfs, *vision) if vision is not None and self.vlm_mfs else mfs


# the ranges before 0.5.11 charge a request its whole length in the sliding pool and check nothing at start-up
_WHOLE = {"swa_charge": "whole", "swa_chunk_shrink": False, "swa_pool_check": False}
# before 0.4.10: no multimodal cut, no state-slot cap on max_running_requests, no padding slot; 0.4.10 - 0.5.9: only
# the listed multimodal architectures get the cut; 0.5.3 - 0.5.9 (0.5.4 - 0.5.9 read, 0.5.3 follows 0.5.4): the
# speculative reserve of 2 GiB (STANDALONE 6, NGRAM none), the state-slot cap, no padding slot
_BEFORE_0_5_17 = {"mamba_padding_slot": False, "mamba_stage_share": False}
# a given --max-running-requests: as given up to 0.5.9 (0.4.8 read; 0.4.0 - 0.4.7 assumed alike), capped by the
# estimate in 0.5.10 - 0.5.13 (serving_sglang.GIVEN_RUNNING_RULES)
_AS_GIVEN = {"given_running": "as_given"}
# before 0.5.3: no --max-mamba-cache-size, no mamba strategy flag; 0.5.3 - 0.5.6: the state pool by count only
# without the radix cache, no strategy flag; 0.5.7 - 0.5.13: the strategy flag is --mamba-scheduler-strategy
# (serving_sglang.MAMBA_SIZE_RULES, MAMBA_STRATEGIES)
_NO_MAMBA_FLAGS = {"mamba_sizes": "", "mamba_strategy_flag": "", "no_buffer_overlap_off": False}
_SCHEDULER_STRATEGY = {"mamba_strategy_flag": "--mamba-scheduler-strategy", "no_buffer_overlap_off": False}
# the Qwen3-VL tower before 0.5.7 (qwen3_vl_tower_rope) and before 0.5.8 (qwen3_vl_split_positions): no rotary cache
# of its own, the position table whole
_WHOLE_POSITIONS = {"qwen3_vl_split_positions": False}
_NO_TOWER_ROPE = {"qwen3_vl_tower_rope": False, **_WHOLE_POSITIONS}
# before 0.5.3 (_LISTED_VLM 0.4.10 - 0.5.2; _EARLY before 0.4.10, without the multimodal cut): no state pool rule
# for speculative decoding, no draft-tree page check, speculative decoding's running default in server_args.py
_LISTED_VLM = {"mamba_spec": "", "vlm_subconfig": False, "mamba_running_cap": False, "spec_tree_page_check": False,
               "spec_running_source": "server_args.py", **_BEFORE_0_5_17, **_AS_GIVEN, **_NO_MAMBA_FLAGS,
               **_NO_TOWER_ROPE}
_EARLY = {**_LISTED_VLM, "vlm_mfs": False}
_MID = {"vlm_subconfig": False, "spec_reserve": "eagle_2g", "spec_running_source": "server_args.py", **_BEFORE_0_5_17,
        **_AS_GIVEN}
_RADIX_OFF_SIZES = {"mamba_spec": "factor", "mamba_sizes": "radix_off", "mamba_strategy_flag": "", "no_buffer_overlap_off": False}


def _late(span: str, first: tuple[int, int, int], swa_architectures: frozenset[str], pages: tuple[int, ...],
          exceptions: frozenset[str], spec_exceptions: frozenset[str], last: tuple[int, int, int] | None = None,
          **rules) -> SglangVersion:
    """A range 0.5.10 - 0.5.19 (``last`` None: ``first`` alone): the reserved-memory default with prefill graphs
    (0.5.5's middle GPU tier), trtllm_mha the SM100 default for a model without MLA but the state-space hybrids
    ``exceptions`` and, without speculative decoding, ``spec_exceptions`` (serving_sglang.TRTLLM_MHA_*)."""
    return SglangVersion(f"SGLang {span} (reserved-memory default with prefill graphs)", first, last or first,
                         "reserved", True, True, sg.MID_TIER_0_5_5, swa_architectures, **rules, trtllm_mha_pages=pages,
                         trtllm_mha_exceptions=exceptions, trtllm_mha_spec_exceptions=spec_exceptions)

VERSIONS = (
    SglangVersion("SGLang 0.4.0-0.4.1 (mem_fraction_static by TP size, rotary cache in the model dtype)", (0, 4, 0),
                  (0, 4, 1), "tp", False, False, **_EARLY),
    SglangVersion("SGLang 0.4.2-0.4.5 (mem_fraction_static by TP size)", (0, 4, 2), (0, 4, 5), "tp", False, True,
                  **_EARLY),
    SglangVersion("SGLang 0.4.6 (by TP size up to 80 GiB, 13 GiB kept above)", (0, 4, 6), (0, 4, 6), "0.4.6", False,
                  True, **_EARLY),
    SglangVersion("SGLang 0.4.7 (by TP x PP up to 80 GiB, 18 GiB kept above 96 GiB)", (0, 4, 7), (0, 4, 7), "0.4.7",
                  False, True, **_EARLY),
    # 0.4.8 - 0.5.2 keep mem_fraction_static's GPU tiers; the hybrid SWA pool splits them (serving_sglang's comment
    # above SWA_LAYER_KINDS has each release's rule). 0.4.8 - 0.4.9: no hybrid pool by default
    SglangVersion("SGLang 0.4.8-0.4.9 (GiB kept by GPU tier)", (0, 4, 8), (0, 4, 9), "tiers", False, True,
                  **_EARLY, spec_reserve="any"),
    # 0.4.10 (model_runner.py): Gemma 2/3/3n get a hybrid pool, split by layers (set_num_token_hybrid)
    SglangVersion("SGLang 0.4.10 (GiB kept by GPU tier; Gemma 2/3 hybrid SWA pool)", (0, 4, 10), (0, 4, 10), "tiers",
                  False, True, swa_architectures=sg.HYBRID_SWA_ARCHITECTURES_0_4_10, swa_split="layers",
                  **_WHOLE, **_LISTED_VLM, spec_reserve="any"),
    # 0.5.1 (read): server_args.py forces one pool for every class the model_runner rule would give two; trtllm_mha on
    # SM100 for gpt-oss (model_specific_adjustments). 0.5.0 and 0.5.2 (wheels not read) follow 0.5.1 (the Gemma
    # override came with sglang PR 8895, "Disable gemma3 for SWA", merged 2025-08-07, after 0.4.10)
    SglangVersion("SGLang 0.5.0-0.5.2 (GiB kept by GPU tier)", (0, 5, 0), (0, 5, 2), "tiers", False, True,
                  **_LISTED_VLM, spec_reserve="any", trtllm_mha_pages=sg.TRTLLM_MHA_PAGES_0_5_1,
                  trtllm_mha_architectures=sg.TRTLLM_MHA_ARCHITECTURES_0_5_1),
    # sglang PR 10975's heuristic (reserved MiB by GPU memory); one pool as in 0.5.1; trtllm_mha on SM100 for gpt-oss
    # and Olmo2 (0.5.4 read; 0.5.3, not read, follows it)
    SglangVersion("SGLang 0.5.3-0.5.4 (reserved-memory default, no prefill graphs)", (0, 5, 3), (0, 5, 4),
                  "reserved", False, True, sg.MID_TIER_0_5_3, **_MID, **_NO_TOWER_ROPE,
                  trtllm_mha_pages=sg.TRTLLM_MHA_PAGES_0_5_1,
                  trtllm_mha_architectures=sg.TRTLLM_MHA_ARCHITECTURES_0_5_4,
                  trtllm_mla_architectures=sg.TRTLLM_MLA_ARCHITECTURES_0_5_4,
                  mamba_radix_off=sg.MAMBA_RADIX_OFF_ARCHITECTURES_0_5_4, **_RADIX_OFF_SIZES),
    # 0.5.5 - 0.5.6 (read): one pool; trtllm_mha on SM100 for gpt-oss, Olmo2 and Llama 4
    SglangVersion("SGLang 0.5.5-0.5.6 (reserved-memory default, no prefill graphs)", (0, 5, 5), (0, 5, 6),
                  "reserved", False, True, sg.MID_TIER_0_5_5, **_MID, **_NO_TOWER_ROPE,
                  trtllm_mha_pages=sg.TRTLLM_MHA_PAGES_0_5_1,
                  trtllm_mha_architectures=sg.TRTLLM_MHA_ARCHITECTURES_0_5_5,
                  trtllm_mla_architectures=sg.TRTLLM_MLA_ARCHITECTURES_0_5_4,
                  mamba_radix_off=sg.MAMBA_RADIX_OFF_ARCHITECTURES_0_5_4, **_RADIX_OFF_SIZES),
    # 0.5.7: trtllm_mha the SM100 default for every model without MLA; a hybrid pool for MiMo-V2-Flash only
    # (model_config.py is_hybrid_model), split by layers (model_runner_kv_cache_mixin.py set_num_tokens_hybrid_swa)
    SglangVersion("SGLang 0.5.7 (reserved-memory default, no prefill graphs; trtllm_mha on Blackwell)", (0, 5, 7),
                  (0, 5, 7), "reserved", False, True, sg.MID_TIER_0_5_5, sg.HYBRID_SWA_ARCHITECTURES_0_5_7, "layers",
                  **_WHOLE, **_MID, **_WHOLE_POSITIONS, trtllm_mha_pages=sg.TRTLLM_MHA_PAGES_0_5_1,
                  trtllm_mha_exceptions=sg.TRTLLM_MHA_EXCEPTIONS_0_5_7,
                  trtllm_mla_architectures=sg.TRTLLM_MLA_ARCHITECTURES_0_5_7,
                  mamba_no_buffer_ratio_extra=sg.MAMBA_TRACKING_SLOTS_OVERLAP, mamba_sizes="radix_off_or_given",
                  mamba_spec="upfront_split",
                  **_SCHEDULER_STRATEGY),
    # 0.5.8: is_hybrid_swa_model (Llama 4, gpt-oss, MiMo-V2), split by layers; gpt-oss single under trtllm_mha or
    # speculative decoding (server_args.py _handle_model_specific_adjustments)
    SglangVersion("SGLang 0.5.8 (reserved-memory default, no prefill graphs; hybrid SWA pool split by layers)",
                  (0, 5, 8), (0, 5, 8), "reserved", False, True, sg.MID_TIER_0_5_5, sg.HYBRID_SWA_ARCHITECTURES_0_5_8,
                  "layers", **_WHOLE, **_MID,
                  swa_single_under_trtllm_mha=frozenset({"GptOssForCausalLM"}),
                  swa_single_with_speculative=frozenset({"GptOssForCausalLM"}),
                  trtllm_mha_pages=sg.TRTLLM_MHA_PAGES_0_5_1, trtllm_mha_exceptions=sg.TRTLLM_MHA_EXCEPTIONS_0_5_7,
                  trtllm_mla_architectures=sg.TRTLLM_MLA_ARCHITECTURES_0_5_7,
                  mamba_sizes="radix_off_or_given", mamba_spec="upfront_split", **_SCHEDULER_STRATEGY,
                  mamba_spec_no_buffer="radix_off", mamba_spec_no_buffer_archs=frozenset({"NemotronHForCausalLM"})),
    # 0.5.9: 0.5.10's list and split from the single pool's capacity (set_num_tokens_hybrid_swa: "unified
    # memory-based allocation"); gpt-oss single under trtllm_mha only
    SglangVersion("SGLang 0.5.9 (reserved-memory default, no prefill graphs; hybrid SWA pool split by bytes)",
                  (0, 5, 9), (0, 5, 9), "reserved", False, True, sg.MID_TIER_0_5_5, sg.HYBRID_SWA_ARCHITECTURES_0_5_10,
                  "capacity", **_WHOLE, **_MID,
                  swa_single_under_trtllm_mha=frozenset({"GptOssForCausalLM"}),
                  trtllm_mha_pages=sg.TRTLLM_MHA_PAGES_0_5_1, trtllm_mha_exceptions=sg.TRTLLM_MHA_EXCEPTIONS_0_5_9,
                  trtllm_mla_architectures=sg.TRTLLM_MLA_ARCHITECTURES_0_5_9, mamba_spec="upfront",
                  mamba_spec_no_buffer="radix_off", **_SCHEDULER_STRATEGY),
    # piecewise (prefill) CUDA graphs on by default from 0.5.10 (docs/logs/sglang-code52132052242-qwen3-8b-b200.log
    # captures them); 0.5.6 has them off (docs/logs/sglang-code46415979912-lfm2-700m.log)
    # 0.5.10's scheduler still charges a request its whole length in the sliding pool (schedule_policy.py
    # PrefillAdder.rem_total_tokens: the min of both pools; _swa_budget_for_req arrives in 0.5.11)
    _late("0.5.10", (0, 5, 10), sg.HYBRID_SWA_ARCHITECTURES_0_5_10, sg.TRTLLM_MHA_PAGES_0_5_1,
          sg.TRTLLM_MHA_EXCEPTIONS_0_5_10, sg.TRTLLM_MHA_SPEC_EXCEPTIONS_0_5_10, swa_split="capacity", **_WHOLE,
          spec_reserve="eagle_4g", **_BEFORE_0_5_17, given_running="estimate", **_SCHEDULER_STRATEGY,
          trtllm_mla_architectures=sg.TRTLLM_MLA_ARCHITECTURES_0_5_9, mamba_spec="upfront",
          mamba_spec_no_buffer="refuse", spec_running_source="server_args.py"),
    # 0.5.11 - 0.5.15 (0.5.11, 0.5.12, 0.5.13, 0.5.14, 0.5.15 read): schedule_policy.py _swa_budget_for_req charges
    # the window as a floor, and a request the free sliding tokens do not cover waits; no start-up check of the pool.
    # Split at 0.5.14, which drops the default mem_fraction_static's 4 GiB speculative reserve (0.5.11 - 0.5.13 keep it)
    # split at 0.5.13, whose handle_max_mamba_cache solves the speculative states jointly (MAMBA_SPEC_RULES "joint")
    _late("0.5.11-0.5.12", (0, 5, 11), sg.HYBRID_SWA_ARCHITECTURES_0_5_11, sg.TRTLLM_MHA_PAGES_0_5_1,
          sg.TRTLLM_MHA_EXCEPTIONS_0_5_11, sg.TRTLLM_MHA_SPEC_EXCEPTIONS_0_5_11, last=(0, 5, 12),
          swa_charge="window_floor", swa_chunk_shrink=False, swa_pool_check=False, spec_reserve="eagle_4g",
          **_BEFORE_0_5_17, given_running="estimate", **_SCHEDULER_STRATEGY,
          trtllm_mla_architectures=sg.TRTLLM_MLA_ARCHITECTURES_0_5_12, mamba_spec="upfront",
          mamba_spec_no_buffer="refuse", spec_running_source="server_args.py"),
    _late("0.5.13", (0, 5, 13), sg.HYBRID_SWA_ARCHITECTURES_0_5_11, sg.TRTLLM_MHA_PAGES_0_5_1,
          sg.TRTLLM_MHA_EXCEPTIONS_0_5_11, sg.TRTLLM_MHA_SPEC_EXCEPTIONS_0_5_11,
          swa_charge="window_floor", swa_chunk_shrink=False, swa_pool_check=False, spec_reserve="eagle_4g",
          **_BEFORE_0_5_17, given_running="estimate", **_SCHEDULER_STRATEGY,
          trtllm_mla_architectures=sg.TRTLLM_MLA_ARCHITECTURES_0_5_12, mamba_spec="joint",
          mamba_spec_no_buffer="refuse"),
    _late("0.5.14-0.5.15", (0, 5, 14), sg.HYBRID_SWA_ARCHITECTURES_0_5_11, sg.TRTLLM_MHA_PAGES_0_5_1,
          sg.TRTLLM_MHA_EXCEPTIONS_0_5_11, sg.TRTLLM_MHA_SPEC_EXCEPTIONS_0_5_11, last=(0, 5, 15),
          swa_charge="window_floor", swa_chunk_shrink=False, swa_pool_check=False, **_BEFORE_0_5_17,
          mamba_extra_buffer=sg.MAMBA_EXTRA_BUFFER_ARCHITECTURES_0_5_14, mamba_spec="joint",
          trtllm_mla_architectures=sg.TRTLLM_MLA_ARCHITECTURES_0_5_12),
    # 0.5.16: the same charge (max(alloc - window, 0) + _swa_reserved_tokens); a request it does not fit is admitted
    # with a smaller chunk (_swa_chunk_cap)
    _late("0.5.16", (0, 5, 16), sg.HYBRID_SWA_ARCHITECTURES_0_5_16, sg.TRTLLM_MHA_PAGES_0_5_1,
          sg.TRTLLM_MHA_EXCEPTIONS_0_5_11, sg.TRTLLM_MHA_SPEC_EXCEPTIONS_0_5_11, swa_charge="window_floor",
          swa_pool_check=False, **_BEFORE_0_5_17,
          mamba_extra_buffer=sg.MAMBA_EXTRA_BUFFER_ARCHITECTURES_0_5_16, mamba_spec="joint",
          trtllm_mla_architectures=sg.TRTLLM_MLA_ARCHITECTURES_0_5_16),
    # 0.5.17 - 0.5.18 (both read): the window in the charge is min(extend + decode, window), no longer a floor;
    # trtllm_mha takes 128-token pages
    _late("0.5.17-0.5.18", (0, 5, 17), sg.HYBRID_SWA_ARCHITECTURES_0_5_17, sg.TRTLLM_MHA_PAGES_0_5_17,
          sg.TRTLLM_MHA_EXCEPTIONS_0_5_17, sg.TRTLLM_MHA_SPEC_EXCEPTIONS_0_5_17, last=(0, 5, 18),
          swa_pool_check=False, mamba_extra_buffer=sg.MAMBA_EXTRA_BUFFER_ARCHITECTURES_0_5_17,
          trtllm_mla_architectures=sg.TRTLLM_MLA_ARCHITECTURES_0_5_17),
    # 0.5.19: Nemotron-H takes trtllm_mha on SM100 (model_overrides/nemotron_h.py)
    _late("0.5.19", (0, 5, 19), sg.HYBRID_SWA_ARCHITECTURES_0_5_19, sg.TRTLLM_MHA_PAGES_0_5_17,
          sg.TRTLLM_MHA_EXCEPTIONS_0_5_19, sg.TRTLLM_MHA_SPEC_EXCEPTIONS_0_5_17, swa_pool_check=False,
          mamba_extra_buffer=sg.MAMBA_EXTRA_BUFFER_ARCHITECTURES_0_5_19,
          trtllm_mla_architectures=sg.TRTLLM_MLA_ARCHITECTURES_0_5_19),
    # 0.5.20+ (0.5.20 - 0.5.23 read): pool_configurator.py validate_swa_pool_size refuses a sliding pool of at most the
    # window + a page at start-up
    SglangVersion(f"SGLang 0.5.20+ (read in {sg.RULES.split()[-1]}; reserved-memory default with prefill graphs)",
                  (0, 5, 20), None, "reserved", True, True, swa_architectures=sg.HYBRID_SWA_ARCHITECTURES_0_5_20,
                  trtllm_mha_pages=sg.TRTLLM_MHA_PAGES_0_5_17, trtllm_mha_exceptions=sg.TRTLLM_MHA_EXCEPTIONS_0_5_19,
                  trtllm_mha_spec_exceptions=sg.TRTLLM_MHA_SPEC_EXCEPTIONS_0_5_20,
                  mamba_extra_buffer=sg.MAMBA_EXTRA_BUFFER_ARCHITECTURES_0_5_23,
                  trtllm_mla_architectures=sg.TRTLLM_MLA_ARCHITECTURES_0_5_20),
)


# the first release taking each --speculative-algorithm kvplan reads beyond EAGLE, EAGLE3, NEXTN
# (SGLang._refuse_spec_release)
SPEC_FIRST_RELEASE = {"STANDALONE": (0, 5, 3), "NGRAM": (0, 5, 3)}
# NGRAM's draft tree width: server_args.py speculative_ngram_max_bfs_breadth = 10 (0.5.4, 0.5.10, 0.5.13 read), which
# _handle_speculative_decoding copies into speculative_eagle_topk; kvplan does not take the flag
NGRAM_BFS_BREADTH = 10


class SGLang(Server):
    name = "sglang"
    display_name = "SGLang"
    rules = VERSIONS[-1].label
    version = VERSIONS[-1]
    versions = tuple(v.span for v in VERSIONS)
    extra_flags = frozenset({"speculative_algorithm", "speculative_draft_model_path", "speculative_num_steps",
                             "speculative_eagle_topk", "speculative_num_draft_tokens", "swa_full_tokens_ratio",
                             "disable_hybrid_swa_memory", "max_running_requests", "disable_radix_cache",
                             "max_mamba_cache_size", "mamba_radix_cache_strategy"})
    budget_flag = "--mem-fraction-static"
    launches_replicas = True  # --dp-size
    kv_follows_model_dtype = True
    newest_read = (0, 5, 23)  # the newest release whose source the rules were read in
    registry_column = "sglang"  # model_registries.FIRST_RELEASES: the first release loading each architecture
    # configs/model_config.py ModelConfig._derive_context_length (read in 0.5.20 and 0.5.23): a --context-length past
    # the config's raises unless this is 1
    long_context_env = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
    # PD decode pre-allocates input_len + num_reserved_decode_tokens per request (srt/disaggregation/decode.py
    # _prealloc_required_tokens; server_args.py num_reserved_decode_tokens, default 512)
    disagg_decode_reserve_tokens = 512

    def decode_micro_batches(self, pp: int) -> int:
        """pp micro-batches (read in 0.4.8 and 0.5.23): Scheduler.event_loop_pp keeps one running batch per micro-batch
        (running_mbs, a request in one of them) and runs them in turn on each stage (managers/scheduler.py 0.4.8;
        scheduler_pp_mixin.py init_pp_loop_state 0.5.7+: pp_loop_size = pp_size + pp_async_batch_depth, default 0 in
        server_args.py)."""
        return pp
    # server_args (arg_groups/fields/disagg.py, 0.5.23): disaggregation_mode "null" | "prefill" | "decode",
    # disaggregation_transfer_backend "mooncake" by default
    disagg_roles = {"prefill": "--disaggregation-mode prefill", "decode": "--disaggregation-mode decode"}
    disagg_note = ("SGLang: sglang-router in PD mode pairs the prefill and decode workers; the KV moves over the "
                   "mooncake transfer backend by default (--disaggregation-transfer-backend)")
    description = ("SGLang token pool, page size 1: one slot per token and layer (sliding layers counted in full "
                   "here; `kvplan plan` splits the hybrid SWA pool of the architectures SGLang gives one)")
    flops_rule = ("SGLang: logits only for the last position of each sequence; FlashInfer/FA3 over the sequence's own "
                  "tokens (sliding: last W); MLA: expand in prefill, absorb in decode")
    kv_dtypes = ("fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2")
    _dtype_hint = " (SGLang --kv-cache-dtype: auto, fp8_e4m3, fp8_e5m2)"

    def quant_kernel(self, card, gpu):
        """AWQ and GPTQ as this release picks them on ``gpu`` (serving_sglang.int_kernel, by the release planned:
        Server.release); other quantizations: serving_sglang.quant_kernel."""
        return sg.quant_kernel(self.release(), str(gpu.vendor), gpu.compute_capability, card.quantization)

    def check_servable(self, card: ModelCard, layout: Layout) -> None:
        super().check_servable(card, layout)
        if card.ssm is not None and card.ssm.kind not in sg.SSM_STATE_KINDS:
            raise KvplanError(f"--engine sglang: SGLang's state pool is modelled for Mamba-2, Gated DeltaNet and LFM2 "
                              f"short-conv mixers (Mamba2StateShape); {card.name}'s is {card.ssm.kind}: "
                              "use --engine vllm")
        if card.ssm is not None and not card.attention_layers:
            # SGLang 0.5.20 - 0.5.23 (first to load Mamba2ForCausalLM): configs/model_config.py PURE_SSM_ARCHITECTURES
            # gives head_dim 0, so pool_configurator.py DefaultPoolConfigurator has cell size 0 and max_total_num_tokens
            # = --max-total-tokens or context_len (no K/V pool; the memory the state split leaves is unused), and
            # mem_cache/kv_cache_configurator.py resolve_max_num_reqs caps max_running_requests at
            # max_mamba_cache_size // _calculate_mamba_ratio() (3 with the radix cache): rules kvplan does not model
            raise KvplanError(f"--engine sglang: {card.name} has no attention layers ({card.state_layers} state "
                              "layers): SGLang sizes no K/V pool for it and caps running requests by its state slots "
                              "(kv_cache_configurator.py resolve_max_num_reqs), which kvplan does not model; use "
                              "--engine vllm")

    def at_version(self, text: str) -> SGLang:
        """``--engine sglang==0.5.6``: the modelled range that covers the release (a bare 0.5 is 0.5.0)."""
        return at_range(self, SGLang, text, VERSIONS)

    def positions_held(self, window: int | None, run: CacheRun) -> int:
        # srt/mem_cache/memory_pool.py MHATokenToKVPool: page_size 1 by default, a slot per cached token
        return run.seq_len

    def chunk_positions(self, chunk: int, run: CacheRun) -> int:
        """A chunked local-attention layer (Llama 4) keeps every token in the one token pool, as a sliding layer."""
        return run.seq_len

    # -- options --

    def resolve(self, flags: ServingFlags, card, gpu, total, layout, max_model_len) -> Options:
        block = (require_positive("--block-size", flags.block_size, MAX_BLOCK_TOKENS) if flags.block_size is not None
                 else sg.DEFAULT_PAGE_SIZE)
        if flags.gpu_memory_utilization is not None:
            raise KvplanError("--gpu-memory-utilization: SGLang sizes its pool with --mem-fraction-static instead")
        value = flags.mem_fraction_static
        vision = (card.vision.num_layers, card.vision.hidden_size) if self.version.is_multimodal(card) else None
        mfs = value if value is not None else self.version.default_mfs(
            sg.capacity_mib(total, gpu.engine_memory_bytes, gpu.nvidia_smi_memory_mib), layout.tp, layout.pp,
            card.mla is not None, gpu.vendor == "NVIDIA", flags.speculative_algorithm, vision)
        if value is not None:
            require_fraction("--mem-fraction-static", value)
        mfs_note = None if value is not None else self._mfs_note(card, flags.speculative_algorithm, vision)
        if not 0 < mfs <= 1:
            error = KvplanError if value is not None else Refused  # the default formula refuses a small GPU
            raise error(f"--mem-fraction-static: SGLang needs a fraction in (0, 1], got {mfs} "
                        f"{'(its default formula for this GPU)' if value is None else ''}".rstrip())
        self._refuse_vllm_only(flags)
        from kvplan.cost.features import parse_sglang_speculative

        self._refuse_spec_release(flags)
        speculative = parse_sglang_speculative(flags, card)
        spec_note = None
        if (speculative is not None and speculative.method != "ngram" and (speculative.topk or 1) > 1 and block > 1
                and self.release() < (0, 4, 9)):  # 0.4.8 server_args.py __post_init__ (0.4.9+ keep the tree)
            spec_note = (f"SGLang speculative decoding: {self.version.label.split(' (')[0]} runs the draft as a chain "
                         f"with pages of {block} tokens ('speculative_eagle_topk is adjusted to 1 when page_size > 1', "
                         f"then the draft tokens to steps + 1 = {speculative.k + 1}): top-k "
                         f"{speculative.topk} on the line is not what it runs; kvplan's latency takes that chain")
        elif speculative is not None and speculative.method != "ngram" and (speculative.topk or 1) > 1:
            spec_note = (f"SGLang speculative decoding: a draft tree (top-k {speculative.topk}, "
                         f"{flags.speculative_num_draft_tokens} draft tokens verified per step) is launched as given; "
                         f"kvplan's latency bound takes a chain of {speculative.k} steps verifying "
                         f"{speculative.k + 1} tokens (the tree's verification width and acceptance are not modelled; "
                         "its memory is)")
        elif speculative is not None and flags.speculative_num_steps is None and speculative.method != "ngram":
            auto = sg.auto_speculative_params(self.version.first, card.hf_architecture, speculative.method)
            if auto != (speculative.k, speculative.topk, speculative.k + 1):
                spec_note = (f"SGLang speculative decoding: the launch line fixes kvplan's chain of {speculative.k} "
                             f"steps (top-k {speculative.topk}, {speculative.k + 1} draft tokens); launched without "
                             f"the three flags, {self.version.label.split(' (')[0]} would choose "
                             f"{auto[0]} steps, top-k {auto[1]}, {auto[2]} draft tokens for {card.hf_architecture} "
                             "(auto_choose_speculative_params), a tree kvplan does not model")
        running = self._given_running(flags, card, speculative is not None)
        mamba = self._mamba_flags(flags, card)
        self._refuse_spec_no_buffer(card, Options(speculative=speculative, **mamba))
        pages = self.version.trtllm_mha_pages
        # the top-k the launch line gives, as the default backend reads it (utils is_no_spec_infer_or_topk_one, read
        # in 0.5.7, 0.5.13, 0.5.18, 0.5.23: "speculative_eagle_topk == 1 and (page_size == 1 or page_size is None)"):
        # a top-k of 1 with a --page-size above 1 is no longer "top-k one", so no trtllm_mha
        topk = None if speculative is None else speculative.topk
        trtllm = self.version.uses_trtllm_mha(gpu, card, speculative is not None,
                                              topk if topk != 1 or block == 1 else None)
        mla = not trtllm and self.version.uses_trtllm_mla(gpu, card)
        if mla:
            pages = sg.TRTLLM_MLA_PAGES
            if flags.kv_cache_dtype == "fp8_e5m2":  # server_args.py (0.5.4 - 0.5.14), arg_groups/overrides.py
                # _mla_kv_cache_dtype_checks (0.5.15+): "TensorRT-LLM MLA backend only supports kv-cache-dtype of
                # fp8_e4m3, [fp4_e2m1, bf16,] or auto" in every release 0.5.4 - 0.5.23
                raise Refused(f"--kv-dtype: SGLang serves {card.name} on {gpu.name} with trtllm_mla, which refuses "
                              "fp8_e5m2 K/V; allowed: fp8_e4m3 or the model dtype")
        changed = (trtllm or mla) and block not in pages
        if changed:
            block = sg.TRTLLM_MHA_PAGE  # SGLang's own change of the page size, the given one or its default 1
        speculative = self._spec_backend(speculative, card, gpu, block, "trtllm_mla" if mla else
                                         "trtllm_mha" if trtllm else None)
        swa_ratio, single = self._swa_ratio(flags, card, speculative is not None, trtllm)
        release = self.version.label.split(" (")[0]
        note = f"{release} gives {card.name} one pool: {single}" if single else None
        if flags.swa_full_tokens_ratio is not None and swa_ratio is None:
            why = ("--disable-hybrid-swa-memory gives one pool" if flags.disable_hybrid_swa_memory else note or
                   f"{release} gives {card.name} one pool: its architecture "
                   f"({card.hf_architecture or 'not named by the card'}) is not one that release gives a hybrid SWA "
                   "pool, or it lacks sliding-window or full-attention layers")
            note = f"--swa-full-tokens-ratio {flags.swa_full_tokens_ratio}: not used, as SGLang ignores it: {why}"
        whose = (f"in {release} its default there for a few families, {card.hf_architecture} among them: "
                 "server_args.py _handle_model_specific_adjustments" if self.version.trtllm_mha_architectures
                 is not None else "its default there for a model without MLA from 0.5.7" + (
                     f"; {release} picks triton for {card.hf_architecture} only without speculative decoding"
                     if card.hf_architecture in self.version.trtllm_mha_spec_exceptions else ""))
        if mla:
            arch = card.hf_architecture
            whose = f"its default there for {arch} from {sg.TRTLLM_MLA_SINCE[arch]}: " + (
                "_kimi_k3_overrides, arg_groups/model_overrides/kimi_k3.py in 0.5.19+"
                if arch == "KimiK3ForConditionalGeneration" else
                "_handle_model_specific_adjustments, arg_groups/model_overrides/deepseek_v2.py in 0.5.19+")
        backend = "trtllm_mla" if mla else "trtllm_mha"
        return Options(mfs=mfs, block_size=block, speculative=speculative, swa_note=note, page_note=(
                           f"SGLang on {gpu.name} (SM100) serves {card.name} with the {backend} attention backend "
                           f"({whose}), whose pages hold {', '.join(map(str, pages))} tokens: "
                           f"page size {block}" + (f" (SGLang changes {flags.block_size} to 64)" if changed and
                                                   flags.block_size is not None else "")) if trtllm or mla else None,
                       swa_ratio=swa_ratio,
                       swa_disabled=flags.disable_hybrid_swa_memory, mfs_note=mfs_note, max_running_requests=running,
                       spec_note=spec_note, **mamba)

    def _refuse_spec_no_buffer(self, card, opts: Options) -> None:
        """0.5.10 - 0.5.13 refuse speculative decoding on a hybrid with the radix cache on under no_buffer (what
        "auto" becomes then): _handle_mamba_radix_cache's ValueError (SglangVersion.mamba_spec_no_buffer "refuse",
        where SglangVersion.mamba_spec_no_buffer_rule meets ``card`` under ``opts``)."""
        v = self.version
        if v.mamba_spec_no_buffer_rule(card, opts) != "refuse":
            return
        raise KvplanError(f"--speculative-algorithm: {v.label.split(' (')[0]} refuses speculative decoding for "
                          f"{card.hf_architecture} with the radix cache under the no_buffer mamba strategy (what auto "
                          "becomes in 0.5.7 - 0.5.13): server_args.py _handle_mamba_radix_cache raises 'Speculative "
                          f"decoding for {card.hf_architecture} is not compatible with radix cache'; allowed: add --disable-radix-cache, or "
                          "plan with sglang 0.5.9 (which turns the radix cache off itself) or 0.5.14+")

    def _refuse_spec_release(self, flags: ServingFlags) -> None:
        """--speculative-algorithm STANDALONE / NGRAM before 0.5.3: server_args.py ``add_cli_args`` has
        ``"--speculative-algorithm", choices=["EAGLE", "EAGLE3", "NEXTN"]`` in 0.4.8, 0.4.9, 0.4.10 and 0.5.1 (read;
        0.4.0 - 0.4.7, 0.5.0 and 0.5.2 assumed alike), ``[..., "STANDALONE", "NGRAM"]`` in 0.5.4 - 0.5.11 and the
        builtins of SpeculativeAlgorithm from 0.5.12 (read to 0.5.23; 0.5.3, not read, follows 0.5.4)."""
        name = str(flags.speculative_algorithm or "").upper()
        if name in SPEC_FIRST_RELEASE and self.version.first < SPEC_FIRST_RELEASE[name]:
            first = ".".join(map(str, SPEC_FIRST_RELEASE[name]))
            raise KvplanError(f"--speculative-algorithm {name}: {self.version.label.split(' (')[0]} does not take it "
                              f"(its choices: EAGLE, EAGLE3, NEXTN); SGLang {first}+ does (--engine sglang=={first} "
                              "or later)")

    def _spec_backend(self, spec, card, gpu, page: int, trtllm: str | None):
        """A draft tree (top-k > 1; NGRAM's is speculative_ngram_max_bfs_breadth, default 10) with pages of more
        than one token (``page``: as SGLang runs it, trtllm_mla's 64 included): 0.5.4+ raise ValueError
        ("speculative_eagle_topk > 1 with page_size > 1 is unstable") unless the attention backend is flashinfer (server_args.py _handle_speculative_decoding, 0.5.4 - 0.5.5; also fa3
        0.5.6 - 0.5.12; also triton in arg_groups/speculative_hook.py _handle_eagle_family 0.5.13+; NGRAM flashinfer
        alone, _handle_ngram). Up to 0.5.6 SGLang picks its default backend after that check (model_runner.py), so it
        is None there unless the model's adjustments set one; from 0.5.7 it is picked before (flashinfer for a tree on
        NVIDIA, fa3 on Hopper for NGRAM, whose top-k is set after). The line names flashinfer where SGLang takes it:
        an NVIDIA GPU, a model without MLA (kvplan's pool is the same K/V for any of these backends; flashinfer
        is no trtllm backend, which a tree never gets: uses_trtllm_mha), and none of the families whose
        _handle_model_specific_adjustments assert their own backends (0.5.4: gpt-oss, Olmo 2, Llama 4); else
        refused, as where SGLang serves the model with ``trtllm`` (trtllm_mla / trtllm_mha, named by its own
        adjustments: not among the backends the check takes). 0.4.8 sets the top-k to 1 with pages instead; 0.4.9 -
        0.5.2 take the tree with pages."""
        topk = NGRAM_BFS_BREADTH if spec is not None and spec.method == "ngram" else getattr(spec, "topk", None)
        if spec is None or page <= 1 or topk is None or topk <= 1 or not self.version.spec_tree_page_check:
            return spec
        tree = "--speculative-algorithm NGRAM" if spec.method == "ngram" else f"--speculative-eagle-topk {topk}"
        arch = card.hf_architecture or ""
        if trtllm is not None:
            raise KvplanError(f"{tree}: SGLang {self.version.span} serves {card.name} on {gpu.name} with {trtllm} "
                              f"({page}-token pages), and takes a draft tree with pages of more than one token only "
                              "on flashinfer (server_args.py _handle_speculative_decoding); allowed: "
                              + ("an algorithm other than NGRAM" if spec.method == "ngram"
                                 else "--speculative-eagle-topk 1"))
        if (gpu.vendor != "NVIDIA" or card.mla is not None or arch in ("GptOssForCausalLM", "Olmo2ForCausalLM")
                or "Llama4" in arch):
            raise KvplanError(f"--block-size {page}: SGLang {self.version.span} takes {tree} with pages of more "
                              "than one token only on the flashinfer attention backend (server_args.py "
                              f"_handle_speculative_decoding), which kvplan does not model for {card.name} on "
                              f"{gpu.name}; allowed: --block-size 1" + (
                                  "" if spec.method == "ngram" else " or --speculative-eagle-topk 1"))
        return replace(spec, passed_on=(*spec.passed_on, "--attention-backend flashinfer"))

    def _given_running(self, flags: ServingFlags, card, speculative: bool) -> int | None:
        """--max-running-requests as given (a positive count; with speculative decoding on a hybrid it also sizes the
        intermediate draft states: serving_sglang.MAMBA_SPEC_RULES)."""
        n = flags.max_running_requests
        if n is None:
            return None
        return require_positive("--max-running-requests", n)

    def _mamba_flags(self, flags: ServingFlags, card) -> dict:
        """--disable-radix-cache, --max-mamba-cache-size and --mamba-radix-cache-strategy, checked once against this
        release and ``card``: the Options fields (a size or strategy only where SGLang uses it) and a note of what
        SGLang does with them (serving_sglang.MAMBA_SIZE_RULES, MAMBA_STRATEGIES)."""
        v, release, hybrid = self.version, self.version.label.split(" (")[0], card.ssm is not None
        off, size, strategy = bool(flags.disable_radix_cache), flags.max_mamba_cache_size, flags.mamba_radix_cache_strategy
        notes = []
        if off and hybrid and not v.mamba_sizes:
            raise KvplanError(f"--disable-radix-cache: how {release} sizes {card.name}'s state pool without the radix "
                              "cache is not modelled (handle_max_mamba_cache read from 0.5.4); plan with 0.5.4 or later")
        if off:
            notes.append("--disable-radix-cache: no prefix caching (ChunkCache), so no request reuses another's cached "
                         "prompt" + ("" if hybrid else
                                     "; the pool is sized as without it (kvplan plans no shared prefix for SGLang)"))
        if size is not None:
            size = require_positive("--max-mamba-cache-size", size)
            if not v.mamba_sizes:
                raise KvplanError(f"--max-mamba-cache-size: {release} does not take it (server_args.py has it from "
                                  "0.5.4; 0.5.3 not read); allowed from --engine sglang==0.5.3")
            if not hybrid:
                notes.append(f"--max-mamba-cache-size {size}: not used, as SGLang ignores it: {card.name} has no "
                             "state layers (no mambaish_config)")
                size = None
            elif v.mamba_sizes == "radix_off" and v.mamba_radix(card) and not off:
                notes.append(f"--max-mamba-cache-size {size}: not used: with the radix cache on, {release} sizes the "
                             "state pool by memory and overwrites it (model_runner.py handle_max_mamba_cache, 0.5.4 - "
                             "0.5.6); add --disable-radix-cache to size it by count")
                size = None
        if strategy is not None:
            flag = "--mamba-radix-cache-strategy"
            if strategy not in sg.MAMBA_STRATEGIES:
                raise KvplanError(f"{flag}: one of {', '.join(sg.MAMBA_STRATEGIES)} (extra_buffer_lazy is not "
                                  f"modelled), got {strategy!r}")
            if not v.mamba_strategy_flag:
                raise KvplanError(f"{flag}: {release} does not take it (server_args.py has --mamba-scheduler-strategy "
                                  "from 0.5.7, --mamba-radix-cache-strategy from 0.5.14); allowed from --engine "
                                  "sglang==0.5.7")
            radix = hybrid and v.mamba_radix(card) and not off
            if strategy == "extra_buffer":
                why = (f"{card.name} has no state layers (0.5.23 arg_groups/model_hook.py handle_mamba_radix_cache: "
                       "'needs mamba state')" if not hybrid else "it needs the radix cache, which is off (0.5.10 - "
                       "0.5.13 server_args.py _handle_mamba_radix_cache: 'mamba extra_buffer is not compatible with "
                       "--disable-radix-cache')" if not radix else
                       f"which hybrids {release} takes it for is not modelled before 0.5.14" if not v.mamba_extra_buffer
                       else f"SGLang asserts 'extra_buffer is not supported for {card.hf_architecture}; use no_buffer' "
                       "(mamba_hook.py validate_mamba_extra_buffer)" if card.hf_architecture not in v.mamba_extra_buffer
                       else None)
                if why:
                    raise KvplanError(f"{flag} extra_buffer: {why}; allowed: auto, no_buffer")
            if not radix:
                notes.append(f"{flag} {strategy}: not used, as SGLang ignores it: " + (
                    f"{card.name} has no state layers" if not hybrid else "the radix cache is off"))
                strategy = None
        return {"radix_disabled": off, "max_mamba_cache_size": size, "mamba_strategy": strategy,
                "mamba_note": "; ".join(notes) or None}

    def _mfs_note(self, card, speculative: str | None, vision: tuple[int, int] | None) -> str | None:
        """What this release's default mem_fraction_static keeps for speculative decoding and a multimodal model."""
        v, parts = self.version, []
        if v.mfs_rule in ("tp", "0.4.6", "0.4.7"):
            return None
        spec = sg.speculative_reserve_mib(v.spec_reserve, speculative)
        if spec:
            parts.append(f"{fmt_int(spec)} MiB more reserved for --speculative-algorithm {speculative} (server_args.py "
                         "_handle_gpu_memory_settings: \"draft model and larger cuda graph buffers\")")
        if vision is not None and v.vlm_mfs:
            layers, hidden = vision
            parts.append(f"x {sg.vlm_mem_fraction(1.0, layers, hidden):.4f} for a multimodal model "
                         f"(adjust_mem_fraction_for_vlm: 0.95 x clamp(1 - 0.1 x ({layers} vision layers x "
                         f"{hidden}^2 / (24 x 1024^2) - 1), 0.8, 1.05))")
        elif card.vision is not None and card.hf_architecture in sg.MM_DISABLED_ARCHITECTURES and v.vlm_mfs:
            parts.append(f"no multimodal cut: SGLang turns multimodal off by default for {card.hf_architecture} "
                         "(configs/model_config.py mm_disabled_models; --enable-multimodal turns it on)")
        if not parts:
            return None
        release = v.label.split(" (")[0]
        return f"{release}'s default mem_fraction_static: " + "; ".join(parts)

    def _swa_ratio(self, flags: ServingFlags, card, speculative: bool, trtllm: bool) -> tuple[float | None, str | None]:
        """(swa_full_tokens_ratio where this release gives the card a hybrid SWA pool (its architecture listed,
        sliding-window and full-attention layers both present, --disable-hybrid-swa-memory not given), else None; why
        the release forces one pool on a listed architecture after all, else None)."""
        ratio = flags.swa_full_tokens_ratio
        if ratio is not None and not (isinstance(ratio, (int, float)) and 0 < ratio <= 1):
            raise KvplanError(f"--swa-full-tokens-ratio: SGLang takes a ratio in (0, 1], got {ratio}")
        kinds = set(card.layer_types)
        v, arch = self.version, card.hf_architecture
        hybrid = (arch in v.swa_architectures and not flags.disable_hybrid_swa_memory
                  and bool(kinds & sg.SWA_LAYER_KINDS) and "global" in kinds)
        if not hybrid:
            return None, None
        quote = "server_args.py _handle_model_specific_adjustments: \"Disable hybrid SWA memory for GPT-OSS model with"
        if trtllm and arch in v.swa_single_under_trtllm_mha:
            return None, f"{arch} under the trtllm_mha attention backend ({quote} trtllm_mha attention backend\")"
        if speculative and arch in v.swa_single_with_speculative:
            return None, f"{arch} with speculative decoding ({quote} speculative decoding\")"
        if speculative:
            raise KvplanError("--speculative-algorithm: a draft in SGLang's hybrid SWA pool is not modelled "
                              "(HybridSWAPoolConfigurator's draft layers); add --disable-hybrid-swa-memory")
        return (sg.DEFAULT_SWA_FULL_TOKENS_RATIO if ratio is None else float(ratio)), None

    def overhead_defaults(self, gpus: int) -> tuple[int, int, int]:
        from kvplan.cost.serving_vllm import DEFAULT_CONTEXT_BYTES

        return 0, 0, DEFAULT_CONTEXT_BYTES  # the load's rests: per stage (_load_rests)

    def context_default(self, gpus: int, gpu, default: int) -> int:
        """SGLang reads the free memory that mem_fraction_static multiplies after its communicators are built
        (model_runner.py init_torch_distributed; serving_sglang.start_in_use_bytes)."""
        return sg.start_in_use_bytes(default, gpus, gpu.nvlink_all_gpus)

    def partition(self, card, pp: int) -> list[range]:
        from kvplan.cost.parallel import stage_ranges

        return stage_ranges(sg.pp_partition_sizes(card.num_layers, pp))

    # -- budget: no profiling; activations and graphs live in free x (1 - mfs) --

    def stage(self, s: Setup, pp_rank: int, parts: list[range]) -> Stage:
        w, specs = stage_weights(s, pp_rank, parts)
        # rank_weights holds the cache in the model dtype: float32 for a float32 model, else 16-bit
        v = self.version
        cache = sg.rope_buffers_model_dtype(s.card, s.w_t.activation_bytes, v.qwen3_vl_tower_rope)
        buffers = sg.rope_cache_bytes(cache, s.w_t.activation_bytes, v.rope_cache_fp32 and s.gpu.vendor == "NVIDIA")
        fewer = sg.position_table_saving(s.card, s.layout.tp, v.qwen3_vl_split_positions)  # a Qwen3-VL tower's table
        weights = w.bytes - s.w_t.data_bytes(fewer) + buffers
        requested = int((s.total - s.context) * s.mfs)
        load = s.non_torch if "non_torch" in s.given else _load_rests(s, pp_rank, parts)
        return Stage(pp_rank, w.layers, w.params - fewer, weights, buffers, 0, load, 0, requested,
                     sg.pool_bytes(s.total - s.context, s.mfs, weights + load), specs)

    # -- pool --

    def pool(self, s: Setup, sts: list[Stage]) -> Pool:
        """Tokens per stage = pool // cell_size (page-rounded), MIN across ranks; a request takes its tokens. A hybrid
        first carves its state pool out of the pool (serving_sglang.mamba_split; 512 requests' where the release
        sizes it by count: --max-mamba-cache-size, or the radix cache off, serving_sglang.mamba_count_size and
        mamba_fixed) and a request holds its state slot and, under the extra_buffer
        strategy, its track slots (HybridReqToTokenPool.alloc, MambaPool; resolve_max_num_reqs lets
        max_mamba_cache_size // (3 + track slots) run: running_limit); at PP > 1 each stage charges a slot what the
        release charges (_charged_state). A hybrid SWA pool (serving_sglang.hybrid_swa_tokens, split as the release
        does) gives the full-attention layers ``tokens`` and the sliding-window layers their own, where
        a request is charged at admission what the release's scheduler charges (serving_sglang.SWA_CHARGES: from
        0.5.11 its first prefill chunk or its window, plus a page; its whole length before; _swa_need): whichever
        pool runs out first sets the concurrency."""
        from kvplan.cost.runtimes.results import KVCachePool

        page, L = s.block_size, s.max_model_len
        per_req = cdiv(L, page)
        taken = 1 + self.version.mamba_tracking(s.card, s.layout.pp, s.opts)  # state slots a request holds
        count = self.version.mamba_count(s.card, s.opts) if s.card.ssm is not None else None
        rows, slots, states, swa, concs = [], [], [], [], []
        charged = _charged_state(s.card, sts, self.version.mamba_stage_share)
        for st in sts:
            state = charged if charged is not None else _state_bytes(s.card, st)
            if s.card.ssm is None:
                kv, n = st.available, None
            elif s.opts.speculative is not None:  # the intermediate draft states too (MAMBA_SPEC_RULES)
                kv, n = sg.mamba_spec_split(self.version.mamba_spec, st.available, state,
                                            _draft_tokens(s), self._running_cap(s), self._mamba_ratio(s), count,
                                            self.version.mamba_padding_slot)
            elif count is not None:  # by count: --max-mamba-cache-size, or the radix cache off
                kv, n = sg.mamba_fixed(st.available, state, count, self.version.mamba_padding_slot)
            else:
                kv, n = sg.mamba_split(st.available, state, padding_slot=self.version.mamba_padding_slot)
            split = _swa_split(s, st)
            if split is None:
                tokens = sg.max_total_tokens(kv, _cell(s, st), page) if st.kv_bytes_per_token else 0
                rows.append(rank_row(st, st.kv_bytes_per_token * page, tokens // page, min(L, tokens) if tokens else L))
                concs.append(_concurrency(st, rows[-1].num_blocks / per_req, n, taken))
            else:
                full_bytes, swa_bytes, window = split
                v = self.version
                tokens, swa_tokens = sg.hybrid_swa_tokens(kv, full_bytes, swa_bytes, s.opts.swa_ratio, page,
                                                          v.swa_split, _swa_layers(s.card))
                if v.swa_pool_check and swa_tokens <= window + page:  # validate_swa_pool_size at start-up
                    raise Refused(f"--swa-full-tokens-ratio: SGLang's sliding-window pool ({swa_tokens:,} tokens) "
                                  f"cannot hold even one request: the prefill admission floor is the window "
                                  f"({window:,}) + page_size ({page}) (validate_swa_pool_size)")
                need = _swa_need(s, v, swa_tokens, window)
                swa.append((swa_tokens, swa_bytes, need))
                # before 0.5.11 a request must fit both pools whole (PrefillAdder.rem_total_tokens)
                held = min(tokens, swa_tokens) if v.swa_charge == "whole" else tokens
                rows.append(rank_row(st, full_bytes * page, tokens // page, min(L, held) if held else L))
                concs.append(min(rows[-1].num_blocks / per_req, swa_tokens / need))
            slots.append(n)
            states.append(state)
        lim = min(range(len(sts)), key=lambda i: concs[i])
        pages, tokens = rows[lim].num_blocks, rows[lim].num_blocks * page
        fits = (all((r.num_blocks * page >= L or not st.kv_bytes_per_token) and (n is None or n >= taken)
                    for st, r, n in zip(sts, rows, slots)) and all(t >= n for t, _, n in swa))
        swa_tokens, swa_bytes, need = swa[lim] if swa else (None, None, 0)
        pool = KVCachePool(available_bytes=sts[lim].available, block_size=page,
                           bytes_per_block=rows[lim].bytes_per_block, num_blocks=pages, tokens=tokens, groups=1,
                           padding_layers=0, blocks_per_request=per_req, state_bytes_per_request=states[lim],
                           state_slots=None if slots[lim] is None else min(slots),
                           swa_tokens=swa_tokens, swa_bytes_per_token=swa_bytes)
        fit = min(r.max_model_len_fit for r in rows) if fits or not s.card.ssm else 0
        request = per_req * rows[lim].bytes_per_block + taken * states[lim] + need * (swa_bytes or 0)
        return Pool(sts[lim], pool, concs[lim], request, fits, fit, rows)

    # -- what a plan prints --

    def launch_command(self, s: Setup, repo: str, revision: str | None = None) -> str:
        lay = s.layout
        cmd = [f"{self.launch_env(s)}python -m sglang.launch_server --model-path {repo}",
               *([f"--revision {revision}"] if revision else []), f"--tp-size {lay.tp}"]
        cmd += [f"--pp-size {lay.pp}"] if lay.pp > 1 else []
        cmd += [f"--dp-size {lay.dp}"] if lay.dp > 1 else []
        cmd += [f"--context-length {s.max_model_len}", f"--mem-fraction-static {s.mfs}"]
        cmd += [f"--page-size {s.block_size}"] if s.block_size != 1 else []
        if s.opts.swa_ratio not in (None, sg.DEFAULT_SWA_FULL_TOKENS_RATIO):
            cmd.append(f"--swa-full-tokens-ratio {s.opts.swa_ratio}")
        if s.opts.swa_disabled:
            cmd.append("--disable-hybrid-swa-memory")
        if s.opts.max_running_requests is not None:
            cmd.append(f"--max-running-requests {s.opts.max_running_requests}")
        cmd += ["--disable-radix-cache"] if s.opts.radix_disabled else []
        if s.opts.max_mamba_cache_size is not None:
            cmd.append(f"--max-mamba-cache-size {s.opts.max_mamba_cache_size}")
        if s.opts.mamba_strategy is not None:  # the release's spelling (--mamba-scheduler-strategy 0.5.7 - 0.5.13)
            cmd.append(f"{self.version.mamba_strategy_flag} {s.opts.mamba_strategy}")
            if s.opts.mamba_strategy == "no_buffer" and self.version.no_buffer_overlap_off:
                cmd.append("--disable-overlap-schedule")  # validate_mamba_no_buffer asserts it (0.5.14+)
        spec = s.opts.speculative
        if spec is not None:  # the algorithm, its draft, the steps (k), top-k and draft tokens (features.py
            # parse_sglang_speculative), and the attention backend a tree with pages needs (_spec_backend)
            cmd += [f"--speculative-algorithm {spec.method.upper()}",
                    *([f"--speculative-draft-model-path {spec.model}"] if spec.model else []), *spec.passed_on]
        return " ".join(cmd + dtype_flags(s, "--kv-cache-dtype"))

    def pool_summary(self, p: Pool, s: Setup) -> str:
        return f" ({fmt_int(p.pool.tokens)} tokens)"

    running_limit_flag = "--max-running-requests"

    def running_limit(self, s: Setup, p: Pool) -> int | None:
        """resolve_max_num_reqs from the pool's tokens (serving_sglang.max_running_requests); 0: under two tokens;
        with state layers capped at max_mamba_cache_size // (3 + the extra_buffer track slots), // 1 without the radix
        cache, where the release does (serving_sglang.mamba_ratio, 0.5.4+)."""
        given = self._running_cap(s)
        if given is not None:
            limit = sg.given_running_requests(given, p.pool.tokens, s.max_model_len, self.version.given_running)
        else:
            limit = sg.max_running_requests(p.pool.tokens, s.max_model_len) if p.pool.tokens >= 2 else 0
        if p.pool.state_slots is not None and self.version.mamba_running_cap:
            limit = min(limit, self._mamba_cap(s, p.pool.state_slots))
        return limit

    def _running_cap(self, s: Setup) -> int | None:
        """max_running_requests as SGLang's scheduler reads it: as given, else 48 with speculative decoding
        (serving_sglang.SPEC_MAX_RUNNING_REQUESTS), else None (resolve_max_num_reqs' estimate)."""
        return running_cap(s.opts)

    def _mamba_cap(self, s: Setup, slots: int) -> int:
        return slots // self._mamba_ratio(s)

    def notes(self, s: Setup, p: Pool) -> list[str]:
        out = []
        if s.card.ssm is not None:
            out.append(self._mamba_note(s, p))
        if p.pool.swa_tokens is not None:
            v, window = self.version, _swa_split(s, p.limiting)[2]
            need = _swa_need(s, v, p.pool.swa_tokens, window)
            charge = (f"all {fmt_int(need)} in the sliding one too (before 0.5.11 the scheduler admits a request "
                      "against the smaller of the two pools' free tokens: schedule_policy.py "
                      "PrefillAdder.rem_total_tokens)" if v.swa_charge == "whole" else
                      f"{fmt_int(need)} in the sliding one at admission ({sg.SWA_CHARGES[v.swa_charge]}; window "
                      f"{fmt_int(window)}, chunked_prefill_size {fmt_int(_chunk(s))}"
                      f"{'; a smaller chunk where the pool is short' if v.swa_chunk_shrink else ''})")
            full = p.pool.tokens / (p.pool.blocks_per_request * s.block_size)
            out.append(f"SGLang hybrid SWA pool ({s.card.hf_architecture}, {v.label.split(' (')[0]}; "
                       f"swa_full_tokens_ratio {s.opts.swa_ratio}): 'Use sliding window memory pool. "
                       f"full_layer_tokens={p.pool.tokens}, swa_layer_tokens={p.pool.swa_tokens}' "
                       f"({sg.SWA_SPLITS[v.swa_split]}; sliding = int(full x ratio)). A request of max_model_len "
                       f"holds its tokens in the full pool and is charged {charge}; the pool that runs out first sets "
                       "the concurrency (--disable-hybrid-swa-memory: one pool)" + (
                           f"; the sliding pool's is what the admission charges allow together, and as decode frees "
                           f"what leaves the window, requests admitted over time can reach the full pool's {full:,.1f}"
                           if v.swa_charge != "whole" and p.concurrency < full else "") + ".")
        out += [f"{note}." for note in (s.opts.page_note, s.opts.swa_note, s.opts.mfs_note, s.opts.mamba_note,
                                                s.opts.spec_note) if note]
        reqs = self.running_limit(s, p)
        capped = s.card.ssm is not None and self.version.mamba_running_cap
        given, estimate = self._running_cap(s), "clamp(tokens / context_len x 512, 2048, 4096)"
        how = ("" if s.opts.max_running_requests is not None else
               f" (not given: SGLang's default with speculative decoding, {self.version.spec_running_source})")
        terms = ([estimate, "tokens // 2"] if given is None else
                 {"as_given": [f"--max-running-requests {given:,}{how or ' as given'}"],
                  "estimate": [f"--max-running-requests {given:,}{how}", estimate],
                  "half_tokens": [f"--max-running-requests {given:,}{how}", "tokens // 2"]}[self.version.given_running])
        terms += [f"max_mamba_cache_size // {self._mamba_ratio(s)}"] if capped else []
        rule = terms[0] if len(terms) == 1 else f"min({', '.join(terms)})"
        out.append(f"SGLang admits at most max_running_requests = {reqs:,} requests at once (resolve_max_num_reqs: "
                   f"{rule}).")
        from kvplan.cost.allocator import rests_replayed

        rests = fmt_bytes(p.limiting.non_torch)
        beyond = (f"{rests} as given (--non-torch-memory)" if "non_torch" in s.given else
                  f"{rests}: the caching allocator's rests the load leaves reserved, an ESTIMATE of a replay of its "
                  "allocations, kvplan.cost.allocator.reserved_rest_bytes; --non-torch-memory"
                  if rests_replayed(s.card, s.w_t) else
                  "none charged, as the load of quantized or 8-bit weights is not replayed: 16-bit loads leave 0 - "
                  "227 MiB reserved beyond their tensors, so this pool may be that much high; --non-torch-memory")
        out.append(f"SGLang: pool = (free memory at start x mem_fraction_static {s.mfs}) - weights - what the load "
                   f"holds beyond them ({beyond}); free memory = "
                   f"total - {fmt_bytes(s.context)} {_in_use(s)}{_nccl_note(s)} (--context-memory). Activations and "
                   "CUDA graphs use "
                   "the remaining (1 - mem_fraction_static); the pool's 'fixed overhead' term is not modelled.")
        return out

    def _mamba_ratio(self, s: Setup) -> int:
        return self.version.mamba_ratio(s.card, s.layout.pp, s.opts)

    def _mamba_note(self, s: Setup, p: Pool) -> str:
        """How this release sizes a hybrid's state pool and what a request holds of it."""
        v, arch, slots = self.version, s.card.hf_architecture, p.pool.state_slots or 0
        release = v.label.split(" (")[0]
        states = (f"{fmt_int(slots)} requests of {fmt_bytes(p.pool.state_bytes_per_request)} of states (conv "
                  "bfloat16, SSM float32: SGLang's mamba2_state_dtype defaults)")
        radix, o = v.mamba_radix(s.card, s.opts), s.opts
        if v.mamba_count(s.card, o) is not None:
            why = ("--disable-radix-cache" if o.radix_disabled else
                   f"{release} turns the radix cache off for {arch} under speculative decoding (server_args.py: "
                   "'Disabling radix cache since speculative decoding for "
                   f"{arch} is not supported with radix cache yet')" if v.mamba_spec_no_buffer_rule(s.card, o) == "radix_off" else
                   f"{release} turns the radix cache off for {arch} (model_runner.py: 'model detected, disable radix "
                   "cache')" if not radix else None)
            source = (f"--max-mamba-cache-size {o.max_mamba_cache_size}" if o.max_mamba_cache_size is not None else
                      f"--max-running-requests {o.max_running_requests} without the radix cache"
                      if o.max_running_requests is not None else
                      f"max_running_requests {sg.SPEC_MAX_RUNNING_REQUESTS} (speculative decoding's default) without "
                      "the radix cache" if o.speculative is not None and v.mamba_sizes != "radix_off" else
                      f"{sg.MAMBA_CACHE_SIZE_WITHOUT_RADIX} without the radix cache or --max-running-requests "
                      "(0.5.4 - 0.5.8)")
            split = (f"SGLang hybrid: {why + ', so ' if why else ''}handle_max_mamba_cache sizes the state pool by "
                     f"count, not memory (serving_sglang.MAMBA_SIZE_RULES '{v.mamba_sizes or 'radix_off'}'): "
                     f"max_mamba_cache_size = {states}, from {source}"
                     + (" beside the pool's padding slot" if v.mamba_padding_slot else "")
                     + "; the K/V token pool gets the rest, whatever it is (a count is not capped by memory).")
        else:
            split = (f"SGLang hybrid: the pool is split by mamba_full_memory_ratio "
                     f"{sg.DEFAULT_MAMBA_FULL_MEMORY_RATIO} (state pool = pool x r / (1 + r), kv_cache_configurator.py "
                     f"_handle_max_mamba_cache): max_mamba_cache_size = {states}"
                     + (" beside the pool's padding slot" if v.mamba_padding_slot else "")
                     + "; the K/V token pool gets the rest.")
        if s.layout.pp > 1:
            split += (" At PP > 1 every stage charges a slot " + (
                "the largest stage's share of the model's states (pp_layer_scale, 0.5.17+)" if v.mamba_stage_share else
                "the whole model's states (mamba_cache_per_req over every state layer, before 0.5.17), though it "
                "allocates only its own layers'") + ".")
        if not v.mamba_running_cap:
            return split + " A running request holds one state slot."
        track, ratio = v.mamba_tracking(s.card, s.layout.pp, o), self._mamba_ratio(s)
        given = o.mamba_strategy not in (None, "auto")
        if not radix:
            hold = "without the radix cache a running request holds its one slot (_calculate_mamba_ratio: 1)"
        elif track:
            hold = (f"{'--mamba-radix-cache-strategy extra_buffer' if given else release + ' picks'} the mamba "
                    f"extra_buffer strategy for {arch} ({'' if given else '--mamba-radix-cache-strategy auto: '}"
                    f"the overlap scheduler {'on' if s.layout.pp == 1 else 'off at PP > 1'}, linear-attn backend "
                    f"triton), so a request holds its slot and {track} track slot{'s' if track > 1 else ''} "
                    f"(HybridReqToTokenPool ping-pong buffers): the pool holds {fmt_int(slots // (1 + track))} "
                    f"requests; the ratio is 3 + {track}")
        else:
            hold = (("--mamba-radix-cache-strategy no_buffer: " if given else "")
                    + "with the radix cache (no_buffer) it counts 3 slots a running request, the radix cache's "
                    "checkpoints among them (MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO: 'safe when it is larger than "
                    "2'), though a request takes one; 1 with --disable-radix-cache"
                    + ("; 2 more with --mamba-radix-cache-strategy extra_buffer" if v.mamba_extra_buffer else "")
                    + (f"; {release} adds MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP = {v.mamba_no_buffer_ratio_extra} "
                       "to the ratio of a no_buffer hybrid too (0.5.8 adds it under extra_buffer only)" if v.mamba_no_buffer_ratio_extra
                       else ""))
        spec = "" if s.opts.speculative is None else " " + self._mamba_spec_note(s, p)
        return (split + f" SGLang runs at most max_mamba_cache_size // {ratio} = "
                f"{fmt_int(self._mamba_cap(s, slots))} requests at once (resolve_max_num_reqs: {hold})." + spec)

    def _mamba_spec_note(self, s: Setup, p: Pool) -> str:
        """What speculative decoding's intermediate draft states take (serving_sglang.MAMBA_SPEC_RULES)."""
        v, d, slots = self.version, _draft_tokens(s), p.pool.state_slots or 0
        per, running, ratio = p.pool.state_bytes_per_request, self._running_cap(s), self._mamba_ratio(s)
        count = v.mamba_count(s.card, s.opts)
        release = v.label.split(" (")[0]
        if v.mamba_spec == "":
            return (f"With --speculative-algorithm: {release} has no state pool rule for the intermediate draft "
                    "states (handle_max_mamba_cache read from 0.5.4); they are not charged: the K/V pool is an "
                    "ESTIMATE.")
        # the rule the pool's split took them by (serving_sglang.mamba_spec_copies), at the slots and states it reports
        copies = sg.mamba_spec_copies(v.mamba_spec, per, d, running, ratio, slots, count)
        if v.mamba_spec == "factor":
            how = (f"every state slot carries {d} more copies (x (1 + {d}): model_runner.py handle_max_mamba_cache, "
                   "speculativa_ratio)")
        elif v.mamba_spec in ("upfront_split", "upfront"):
            how = (f"handle_max_mamba_cache takes max_running_requests {running} x {d} copies off the pool first"
                   + (" (not when the state pool is sized by count, 0.5.7 - 0.5.8)" if v.mamba_spec == "upfront_split"
                      else "") + ", then sizes the state pool from the rest")
        else:
            pad = v.mamba_spec == "joint_padded"
            how = (f"the copies are min(max_running_requests {running}, max_mamba_cache_size // {ratio})"
                   + (" + 1 (the padding slot)" if pad else "") + f" x {d}, solved with the state slots out of the "
                   "state budget (_handle_max_mamba_cache: slots = " + (
                       "(budget - per_req x (1 + D)) // (per_req x (1 + D / ratio))" if pad else
                       "budget // (per_req x (1 + D / ratio))") + ")" if count is None else
                   f"the copies are min(max_running_requests {running}, max_mamba_cache_size // {ratio})"
                   + (" + 1" if pad else "") + f" x {d} beside the counted state pool (_handle_max_mamba_cache)")
        return (f"With --speculative-algorithm the verify step keeps each running request's states after each of the "
                f"{d} draft tokens (speculative_num_draft_tokens; memory_pool.py MambaPool intermediate_ssm_state_cache"
                f" / intermediate_conv_window): {how}; {fmt_bytes(copies)} ({copies:,} B) of them come out of the pool "
                "before the K/V token pool (serving_sglang.MAMBA_SPEC_RULES '" + v.mamba_spec + "').")

    def requested_rule(self, s: Setup) -> str:
        return f"free at start x mem_fraction_static {s.mfs}"

    def activation_rule(self, s: Setup) -> str:
        return "not charged: SGLang keeps activations in free x (1 - mem_fraction_static)"


def _cell(s: Setup, st: Stage) -> int:
    """The token pool's bytes per token on this stage: its K/V, scaled for a draft sharing the pool."""
    from kvplan.cost.features import sglang_spec_cell_size

    return sglang_spec_cell_size(st.kv_bytes_per_token, s.opts.speculative,
                                 sum(1 for sp in st.specs if not sp.per_sequence))


def _swa_split(s: Setup, st: Stage) -> tuple[int, int, int] | None:
    """(full-attention layers' bytes per token, sliding-window layers', the window) of this rank where the plan has a
    hybrid SWA pool (Options.swa_ratio) and the rank holds both kinds of layer; else None."""
    if s.opts.swa_ratio is None:
        return None
    sliding = [sp for sp in st.specs if sp.kind in sg.SWA_LAYER_KINDS]
    swa_bytes = sum(sp.bytes_per_token for sp in sliding)
    if not swa_bytes or swa_bytes >= st.kv_bytes_per_token:
        return None
    return st.kv_bytes_per_token - swa_bytes, swa_bytes, max(sp.window or sp.chunk for sp in sliding)


def _chunk(s: Setup) -> int:
    """SGLang's chunked_prefill_size by GPU memory (the release's _handle_gpu_memory_settings tiers)."""
    mib = sg.capacity_mib(s.total, s.gpu.engine_memory_bytes, s.gpu.nvidia_smi_memory_mib)
    return sg.gpu_defaults(mib, s.layout.tp, s.engine.version.mid_tier)[0]


def _swa_need(s: Setup, v: SglangVersion, swa_tokens: int, window: int) -> int:
    """The sliding-window tokens a request of max_model_len takes from the pool at admission: the release's charge
    (serving_sglang.swa_tokens_per_request); from 0.5.16, where the pool cannot meet it, the scheduler shrinks the
    prefill chunk and the request takes the pool, one at a time, if the window it keeps fits (else that window)."""
    L, page = s.max_model_len, s.block_size
    need = sg.swa_tokens_per_request(L, window, page, v.swa_charge, _chunk(s))
    if v.swa_chunk_shrink and need > swa_tokens:
        return max(swa_tokens, sg.swa_tokens_per_request(L, window, page, v.swa_charge, 0))
    return need


def _swa_layers(card) -> tuple[int, int]:
    """The model's (full-attention, sliding-window) layer counts: get_hybrid_layer_ids' full_attention_layer_ids and
    swa_attention_layer_ids over all num_hidden_layers (the "layers" split, serving_sglang.SWA_SPLITS)."""
    kinds = card.layer_types
    return sum(k == "global" for k in kinds), sum(k in sg.SWA_LAYER_KINDS for k in kinds)


def _state_bytes(card, st: Stage) -> int:
    """One request's states on this stage in SGLang's dtypes (0 without state layers)."""
    if card.ssm is None:
        return 0
    conv = sum(c * e for sp in st.specs if sp.kind == "conv_state" for c, e in sp.vectors)  # elements, all layers
    ssm = sum(c * e for sp in st.specs if sp.kind == "ssm_state" for c, e in sp.vectors)
    return sg.state_bytes_per_request(conv, ssm)


def _draft_tokens(s: Setup) -> int:
    """speculative_num_draft_tokens as SGLang resolves it (serving_sglang.NGRAM_DRAFT_TOKENS): NGRAM's as given, else
    12; the EAGLE family's steps + 1 at top-k 1, else as given."""
    spec = s.opts.speculative
    if spec.method == "ngram":
        return spec.draft_tokens or sg.NGRAM_DRAFT_TOKENS
    return spec.k + 1 if (spec.topk or 1) == 1 or spec.draft_tokens is None else spec.draft_tokens


def _charged_state(card, sts: list[Stage], stage_share: bool) -> int | None:
    """At PP > 1, the state bytes every stage's _handle_max_mamba_cache charges a slot: 0.5.17+ the largest stage's
    share, int(mamba_cache_per_req x max stage state layers / all state layers) (pp_layer_scale, get_pp_indices'
    stages); before, mamba_cache_per_req over every state layer of the model (read in 0.5.4 - 0.5.16). None: one
    stage (its own states) or no state layers."""
    if card.ssm is None or len(sts) < 2:
        return None
    whole = sum(_state_bytes(card, st) for st in sts)
    layers = [sum(1 for sp in st.specs if sp.kind == "conv_state") for st in sts]  # a conv state in every state layer
    return int(whole * (max(layers) / sum(layers))) if stage_share else whole


def _concurrency(st: Stage, by_tokens: float, slots: int | None, taken: int = 1) -> float:
    """Requests of max_model_len the pools hold: the K/V tokens, and (hybrid) the state slots, ``taken`` a request
    (its own and its extra_buffer track slots: HybridReqToTokenPool.alloc)."""
    if slots is None:
        return by_tokens
    by_slots = float(slots // taken)
    return by_slots if not st.kv_bytes_per_token else min(by_tokens, by_slots)


def _in_use(s: Setup) -> str:
    """What the memory in use at the start is, as the note names it: a Windows desktop's default share, or the CUDA
    context."""
    default = s.gpu.platform == "windows" and "context" not in s.given
    return "in use at the start (a Windows desktop's default, with the CUDA context)" if default else "CUDA context"


def _nccl_note(s: Setup) -> str:
    """What the default context figure holds beyond the CUDA context at TP > 1 over NVLink (sg.NCCL_NVLINK_BYTES)."""
    from kvplan.cost.serving_vllm import DEFAULT_CONTEXT_BYTES

    with_nccl = sg.start_in_use_bytes(DEFAULT_CONTEXT_BYTES, s.layout.tp * s.layout.pp, s.gpu.nvlink_all_gpus)
    if with_nccl == DEFAULT_CONTEXT_BYTES or s.context != with_nccl:
        return ""
    return (f" and NCCL communicators over NVLink ({fmt_bytes(sg.NCCL_NVLINK_BYTES)} of it, an ESTIMATE: 1.25-1.96 GiB "
            "logged at TP 8)")


def _load_rests(s: Setup, pp_rank: int, parts: list[range]) -> int:
    """What SGLang's load leaves reserved beyond the tensors: its "mem usage" is free memory read after
    torch.cuda.empty_cache before and after the load, so the caching allocator's block rounding and the free rests
    of the segments the weights hold count (kvplan.cost.allocator.reserved_rest_bytes, imported here only; the
    rotary cache as this release keeps it: float32 on CUDA from 0.4.2, serving_sglang.rope_cache_bytes; an M-RoPE
    cache unenlarged, serving_sglang.rope_buffers_model_dtype)."""
    from kvplan.cost.allocator import reserved_rest_bytes

    return reserved_rest_bytes(s.card, s.w_t, s.weight_layout, pp_rank, stages=parts,
                               tower=not s.opts.mm_tower_skipped,
                               rope_fp32=s.engine.version.rope_cache_fp32 and s.gpu.vendor == "NVIDIA",
                               mrope_factor=1)
