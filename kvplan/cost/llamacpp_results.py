"""What llama.cpp allocates, as typed results (``kvplan estimate`` and ``kvplan plan`` JSON with ``--engine
llamacpp|ollama``): the context, each cache and each buffer per device, and the inverse's fits. The arithmetic is in
``kvplan.cost.llamacpp``; these models build their schema on first use, so a plain estimate pays nothing for them."""

from pydantic import BaseModel, ConfigDict

MIB = 2**20


class Buffer(BaseModel):
    """One llama.cpp buffer: the device (CPU, CUDA0, CUDA_Host), its kind (model, lora, kv, recurrent, output, compute),
    exact bytes, and whether kvplan estimates them (compute buffers are measured by llama.cpp)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    device: str
    kind: str
    bytes: int
    estimated: bool = False


class Cache(BaseModel):
    """One cache summary line (``llama_kv_cache: size = ...`` or ``llama_memory_recurrent: size = ...``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    kind: str  # kv, kv_swa, recurrent
    cells: int  # per stream
    layers: int
    seqs: int
    streams: int
    k_type: str
    v_type: str
    k_bytes: int
    v_bytes: int

    @property
    def bytes(self) -> int:
        return self.k_bytes + self.v_bytes

    @property
    def log_name(self) -> str:
        """The llama.cpp log line that sums this cache (llama-memory-recurrent.cpp / llama-kv-cache.cpp)."""
        return "llama_memory_recurrent" if self.kind == "recurrent" else "llama_kv_cache"

    def log_line(self) -> str:
        mib = lambda b: f"{b / MIB:7.2f}"  # noqa: E731 - llama.cpp's %7.2f MiB
        if self.kind == "recurrent":  # llama-memory-recurrent.cpp
            return (f"{self.log_name}: size = {mib(self.bytes)} MiB ({self.cells:6d} cells, {self.layers:3d} "
                    f"layers, {self.seqs:2d} seqs), R (f32): {mib(self.k_bytes)} MiB, S (f32): {mib(self.v_bytes)} MiB")
        return (f"{self.log_name}: size = {mib(self.bytes)} MiB ({self.cells:6d} cells, {self.layers:3d} layers, "
                f"{self.seqs:2d}/{self.streams} seqs), K ({self.k_type}): {mib(self.k_bytes)} MiB, "
                f"V ({self.v_type}): {mib(self.v_bytes)} MiB")


class LlamaContext(BaseModel):
    """llama_context's logged sizes after padding."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    n_ctx: int
    n_ctx_seq: int
    n_seq_max: int
    kv_unified: bool
    flash_attn: bool
    n_gpu_layers: int  # layers offloaded, of n_layer + 1 (the output layer counts)
    n_layer: int
    rules: str


class LlamaMemory(BaseModel):
    """llama.cpp's allocations for one model and flags: the context, every cache, every buffer per device."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    context: LlamaContext
    caches: list[Cache]
    buffers: list[Buffer]
    notes: list[str]

    def device_bytes(self, device: str) -> int:
        return sum(b.bytes for b in self.buffers if b.device == device)

    @property
    def devices(self) -> list[str]:
        return list(dict.fromkeys(b.device for b in self.buffers))

    def log_lines(self) -> list[str]:
        """The buffer lines llama.cpp prints (model, KV, RS, output, compute), then the cache summaries."""
        prefix = {"model": "load_tensors", "kv": "llama_kv_cache", "recurrent": "llama_memory_recurrent",
                  "output": "llama_context", "compute": "llama_context", "lora": "llama_adapter_lora_init_impl"}
        name = {"kv": "KV", "recurrent": "RS", "lora": "LoRA"}
        lines = [f"{prefix[b.kind]}: {b.device:>10s} {name.get(b.kind, b.kind)} buffer size = {b.bytes / MIB:8.2f} MiB"
                 + (" (kvplan's ESTIMATE)" if b.estimated else "") for b in self.buffers]
        return lines + [c.log_line() for c in self.caches]


class LlamaFit(BaseModel):
    """The inverse: what fits a GPU of ``budget_bytes`` (its free memory less --fit's 1 GiB margin)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    budget_bytes: int
    max_n_ctx: int  # the largest -c (a multiple of 256) with the layers as given; 0: none
    max_gpu_layers: int  # the most -ngl at the n_ctx as given (of n_layer + 1); 0: none
    min_n_cpu_moe: int | None = None  # MoE: the fewest --n-cpu-moe with every layer as given that fits; None: none


class QuantFit(BaseModel):
    """One llama-quantize type of a card: its model size and what fits (the quant-type search)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    quant: str
    model_bytes: int  # llama.cpp's "model size": every tensor once
    max_n_ctx: int
    max_gpu_layers: int
    fits: bool  # all layers on the GPU at the plan's -c (one slot of --max-model-len without -c/-np), as the plan fits
    type_k: str = "f16"  # the K/V cache types it needs: the first of f16, q8_0, q4_0 (-ctk/-ctv as given) that fits;
    type_v: str = "f16"  # where none does, the last tried. The figures above are at these types
    chosen: bool = False  # the plan's weights: the first type that fits (best first), or --gguf-quant as given
