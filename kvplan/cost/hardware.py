"""The GPU catalog: memory, bandwidth and dense peak FLOP/s per operand type, shipped as ``kvplan/cost/gpus.yaml``.

>>> from kvplan.cost.hardware import load_gpu
>>> load_gpu("H100-SXM").memory_bandwidth_bytes_per_s
3350000000000

``--gpu-file PATH`` (``load_gpus(extra=PATH)``) adds entries or replaces bundled ones of the same name. Every figure
carries the ``source`` it was taken from.

The bundled catalog is read without YAML or validation (a cold ``kvplan estimate --gpu`` spends ~25 ms less: no
yaml import, no GPU schema build): ``gpus.validated.json`` beside ``gpus.yaml`` holds every entry as ``GPU``
validated it (each field's value, which fields the YAML set), built with ``model_construct`` only while the SHA-256
of ``gpus.yaml`` and of this module's source are the ones it was made from; otherwise the YAML is read and
validated as before, so a stale file costs time, never a wrong figure. ``python -m kvplan.cost.hardware`` rewrites
it; ``tests/test_fast_paths.py`` fails while it is stale and proves every cached entry equal to its validated YAML.
"""

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StrictFloat, StrictInt, ValidationError, model_validator

from kvplan.errors import KvplanError, clip, clip_text, require_line, require_name
from kvplan.units import fmt_bytes, fmt_float

COMPUTE_TYPES: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8")
CACHE_FILE = "gpus.validated.json"


Rate = Annotated[Union[StrictInt, StrictFloat], Field(gt=0, allow_inf_nan=False, le=1e21)]  # FLOP/s, finite
Count = Annotated[StrictInt, Field(gt=0, le=10**18)]  # bytes, bytes/s: true is not 1
# a GPU's memory: no GPU that holds an LLM has less than 256 MiB (a bare figure in GB or GiB is a unit left out)
Memory = Annotated[StrictInt, Field(ge=256 * 2**20, le=10**18)]
VISIBLE_RANGE = (0.5, 1.1)  # the visible and nvidia-smi totals as a multiple of the vendor-stated memory
# the host OS a plan's GPU runs under (--platform): its driver sets the total CUDA reports (GPU.on_platform)
PLATFORMS: tuple[str, ...] = ("linux", "windows")
# GPU memory already in use when an engine reads its free memory on a Windows/WSL2 desktop (the display and the
# desktop's processes hold memory on the one GPU; the engine's own CUDA context is in each figure): total - free as
# each start-up printed it, GiB. The least of them is what every public Windows start-up had in use.
WINDOWS_IN_USE_READINGS_GIB: dict[str, float] = {
    "SGLang 0.4.2, RTX 3090 under WSL2 (docs/logs/sglang-code8893364747-r1-distill-qwen-7b-rtx3090.log: "
    "`Load weight begin. avail mem=22.76 GB` of 24.00)": 1.24,
    "vLLM, RTX 3090 on native Windows (GitHub code index file 59875247307: `Free memory on device (22.6/24.0 GiB)`)":
        1.4,
    "vLLM 0.27.1, RTX 4090 under WSL2 (docs/logs/vllm-code61815222665-qwen2.5-0.5b-rtx4090-v2runner.log: "
    "`(22.45/23.99 GiB)`)": 1.54,
    "vLLM, RTX 5090 under WSL2 and on a Windows desktop (GitHub code index files 69497765629, 60293000203: "
    "`(30.2/31.84 GiB)`)": 1.64,
    "vLLM, RTX 4080 under WSL2 after stopping another vLLM service (GitHub code index file 57768793445: "
    "`(13.88/15.99 GiB)`)": 2.11,
}
# the least reading, to the MiB: the default memory in use at an engine's start under --platform windows (an
# ESTIMATE of a given desktop; --context-memory gives one's own: nvidia-smi's used memory before the start plus the
# engine's CUDA context)
WINDOWS_IN_USE_AT_START_BYTES = round(min(WINDOWS_IN_USE_READINGS_GIB.values()) * 1024) * 2**20


def windows_in_use_range() -> str:
    """The public Windows readings' range, "low-high" in GiB (WINDOWS_IN_USE_READINGS_GIB)."""
    return f"{min(WINDOWS_IN_USE_READINGS_GIB.values())}-{max(WINDOWS_IN_USE_READINGS_GIB.values())}"


def in_use_at_start_bytes(gpu: "GPU", default: int) -> int:
    """The memory in use when an engine on ``gpu`` reads its free memory, by default (``default``: its runtime's on
    Linux, its CUDA context): under Windows/WSL2 at least WINDOWS_IN_USE_AT_START_BYTES, the desktop's share."""
    return max(default, WINDOWS_IN_USE_AT_START_BYTES) if gpu.platform == "windows" else default
# major.minor as torch.cuda.get_device_capability() gives it: 7.0 (V100) .. 12.1 (DGX Spark)
ComputeCapability = Annotated[Union[StrictInt, StrictFloat], Field(ge=1, le=99, allow_inf_nan=False)]


class PeakFlops(BaseModel):
    """Dense (not 2:4-sparse) peak FLOP/s of the matrix units; a type the GPU lacks (or its vendor does not state:
    Gaudi 3 states no FP32 matrix rate) is null."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)  # built when a catalog is read
    fp32: Rate | None = None
    tf32: Rate | None = None
    bf16: Rate | None = None
    fp16: Rate | None = None
    fp8: Rate | None = None
    int8: Rate | None = None


class GPU(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)  # built when a catalog is read
    name: str
    vendor: str
    memory_bytes: Memory = Field(description="Vendor-stated capacity, decimal GB x 10^9 (for display).")
    visible_memory_bytes: Memory | None = Field(
        None, description="The total torch sees (torch.cuda.mem_get_info()[1] = get_device_properties().total_memory, "
                          "cudaMemGetInfo), which vLLM and SGLang start from; plans start from it. Below nvidia-smi's "
                          "figure by what the driver reserves.")
    visible_memory_source: str = Field("", description="The public log or output the visible total was read from.")
    windows_visible_memory_bytes: Memory | None = Field(
        None, description="The total CUDA reports under Windows and WSL2 (--platform windows), where the WDDM driver "
                          "manages the memory: the board's whole memory, nvidia-smi's figure less at most 1 MiB "
                          "(RTX 4090: 24,563 MiB; Linux drivers keep some 0.3-0.9 GiB outside cudaMemGetInfo's total).")
    windows_visible_memory_source: str = Field("", description="The public Windows/WSL2 output it was read from.")
    nvidia_smi_memory_mib: Count | None = Field(None, description="memory.total as nvidia-smi prints it, MiB.")
    memory_bandwidth_bytes_per_s: Count
    peak_flops: PeakFlops
    source: str = Field(min_length=1, description="Vendor datasheet URL the figures come from.")
    note: str = ""
    interconnect_bandwidth_bytes_per_s: Count | None = Field(
        None, description="GPU-to-GPU bandwidth as the datasheet states it (NVLink / Infinity Fabric total, both "
                          "directions; PCIe x16 both directions); the TP all-reduce bound uses half per direction.")
    interconnect: str = Field("", description="What the interconnect figure is (NVLink 4, PCIe Gen4 x16, ...).")
    compute_capability: ComputeCapability | None = Field(None, description="NVIDIA compute capability (9.0: Hopper).")
    nvlink_all_gpus: bool = Field(
        False, description="Every GPU of a server reaches the others over NVLink (SXM / HGX with NVSwitch): NCCL's "
                           "communicators run over NVLink (more channels, more buffer memory than over PCIe).")
    sm_count: Count | None = Field(
        None, description="Streaming multiprocessors (AMD: compute units) as torch's get_device_properties()"
                          ".multi_processor_count reports them, which vLLM's num_compute_units reads; None: not known.")
    sm_count_source: str = Field("", description="The public output or datasheet the SM count was read from.")
    price_per_hour_usd: Rate | None = Field(
        None, description="A public on-demand list price per GPU-hour, USD (the catalog's), or yours (--gpu-file).")
    price_source: str = Field("", description="Where the price was read (pricing page URL, provider, product).")
    price_date: str = Field("", description="The day the price was read, YYYY-MM-DD.")
    _platform: str = PrivateAttr("linux")

    @model_validator(mode="before")
    @classmethod
    def _legacy_price(cls, data: Any) -> Any:
        """``price_per_hour`` (kvplan <= r6 GPU files) is read as ``price_per_hour_usd``."""
        if isinstance(data, dict) and "price_per_hour" in data:
            data = dict(data)
            price = data.pop("price_per_hour")
            data.setdefault("price_per_hour_usd", price)
        return data

    @model_validator(mode="after")
    def _totals_agree(self) -> "GPU":
        """The visible total (and nvidia-smi's) within 0.5x..1.1x the vendor-stated memory: torch sees 0.98x-1.074x
        of it on every catalog GPU (an '80GB' H100 holds 80 GiB, 1.074x 80e9 B, less the driver's share); a figure
        outside is a unit left out or a wrong field. The visible total is at most nvidia-smi's."""
        stated = self.memory_bytes
        for field, total in (("visible_memory_bytes", self.visible_memory_bytes),
                             ("windows_visible_memory_bytes", self.windows_visible_memory_bytes),
                             ("nvidia_smi_memory_mib", (self.nvidia_smi_memory_mib or 0) * 2**20 or None)):
            if total is not None and not stated * VISIBLE_RANGE[0] <= total <= stated * VISIBLE_RANGE[1]:
                raise ValueError(f"{field}: {total:,} B ({fmt_bytes(total)}) is {total / stated:.3g}x memory_bytes "
                                 f"({self.stated_memory}, vendor-stated); allowed: {VISIBLE_RANGE[0]}x.."
                                 f"{VISIBLE_RANGE[1]}x it (a unit left out, or the wrong figure?)")
        smi = self.nvidia_smi_memory_mib
        for field, total in (("visible_memory_bytes", self.visible_memory_bytes),
                             ("windows_visible_memory_bytes", self.windows_visible_memory_bytes)):
            if total is not None and smi is not None and total > smi * 2**20:
                raise ValueError(f"{field}: {fmt_bytes(total)} is more than nvidia-smi's total ({smi:,} MiB); "
                                 "allowed: at most nvidia_smi_memory_mib x 2^20 bytes")
        windows = self.windows_visible_memory_bytes
        if windows is not None and not self.windows_visible_memory_source:
            raise ValueError("windows_visible_memory_bytes: needs windows_visible_memory_source (the Windows or WSL2 "
                             "output it was read from)")
        if windows is not None and self.visible_memory_bytes is not None and windows < self.visible_memory_bytes:
            raise ValueError(f"windows_visible_memory_bytes: {fmt_bytes(windows)} is less than visible_memory_bytes "
                             f"({fmt_bytes(self.visible_memory_bytes)}, Linux's); allowed: at least it (the WDDM "
                             "driver keeps no share outside the total)")
        return self

    @property
    def stated_memory(self) -> str:
        """The vendor's figure as the vendor writes it: decimal GB (an A100-40GB's '40 GB', not 37.3 GiB)."""
        return f"{fmt_float(self.memory_bytes / 1e9)} GB"

    @property
    def price_per_hour(self) -> float | None:
        """The price per GPU-hour (``price_per_hour_usd``); kept for callers of kvplan <= r6."""
        return self.price_per_hour_usd

    @property
    def engine_memory_bytes(self) -> int:
        """The total a plan starts from: the visible total where the catalog records one, else the datasheet's."""
        return self.visible_memory_bytes or self.memory_bytes

    @property
    def platform(self) -> str:
        """The host OS the visible total is for: "linux" (the catalog's), "windows" (``on_platform``)."""
        return self._platform

    def on_platform(self, platform: str, total_given: bool = False) -> "GPU":
        """This GPU as it shows under ``platform`` (``PLATFORMS``): on Windows and WSL2 (the WDDM driver) CUDA
        reports the whole board, ``windows_visible_memory_bytes``, which the plan then starts from; with
        ``total_given`` (--gpu-memory) only the platform is taken (its notes), the total being the user's.
        KvplanError naming --platform where no Windows reading is recorded and no total is given."""
        if require_platform(platform) == self._platform:
            return self
        if self._platform != "linux":  # the Linux total is replaced in the copy: ask the catalog's GPU
            raise KvplanError(f"--platform {platform}: {self.name} is already planned as its {self._platform} "
                              "GPU; allowed: the catalog's GPU (by name)")
        windows = self.windows_visible_memory_bytes
        if windows is None and not total_given:
            known = sorted(g.name for g in load_gpus().values() if g.windows_visible_memory_bytes is not None)
            raise KvplanError(f"--platform windows: no Windows/WSL2 total is recorded for {self.name} (recorded for "
                              f"{', '.join(known)}); add --gpu-memory with torch.cuda.mem_get_info()[1] as that "
                              "host shows it")
        gpu = self.model_copy(update={} if windows is None else {
            "visible_memory_bytes": windows, "visible_memory_source": self.windows_visible_memory_source})
        gpu._platform = "windows"
        return gpu

    def peak(self, compute: str) -> float:
        """Dense peak FLOP/s for ``compute``; KvplanError where the GPU has no such matrix unit."""
        value = getattr(self.peak_flops, compute, None) if compute in COMPUTE_TYPES else None
        if value is None:
            have = [t for t in COMPUTE_TYPES if getattr(self.peak_flops, t) is not None]
            raise KvplanError(f"--gpu: {self.name} states no {compute} peak; allowed: {', '.join(have)}")
        return value


def require_platform(platform: str | None) -> str:
    """--platform's value (None: linux); KvplanError naming --platform for another."""
    if platform is None:
        return "linux"
    if platform not in PLATFORMS:
        raise KvplanError(f"--platform: {clip(platform)}; allowed: {', '.join(PLATFORMS)}")
    return platform


def bundled_gpu_file() -> Path:
    return Path(__file__).with_name("gpus.yaml")


def load_gpus(extra: str | Path | None = None) -> dict[str, GPU]:
    """The bundled catalog, then ``extra``'s entries (same name: extra wins). An extra entry that names a bundled GPU
    (case-insensitively) and sets only its price (``PRICE_FIELDS``) replaces just the price."""
    gpus = dict(_bundled())
    if extra is not None:
        gpus.update(read_gpu_file(Path(extra), base=gpus))
    return gpus


PRICE_FIELDS = frozenset({"price_per_hour_usd", "price_per_hour", "price_source", "price_date"})


@lru_cache(maxsize=1)
def _bundled() -> dict[str, GPU]:
    """The bundled catalog, once per process: from the cache of validated entries while it matches gpus.yaml (see
    the module docstring), else read and validated."""
    return cached_catalog() or read_gpu_file(bundled_gpu_file())


def load_gpu(name: str, gpu_file: str | Path | None = None) -> GPU:
    """One GPU by name, case-insensitively; KvplanError lists the known names."""
    if gpu_file is None and isinstance(name, str):  # one bundled GPU: decode its cache entry alone
        entries = _cached_entries()
        if entries is not None and (hit := entries.get(name.lower())) is not None:
            return _decode(hit)
    gpus = load_gpus(gpu_file)
    by_lower = {k.lower(): v for k, v in gpus.items()}
    if not isinstance(name, str) or name.lower() not in by_lower:
        raise KvplanError(f"--gpu: unknown GPU {clip(name)}; known: {', '.join(sorted(gpus))} (or add it with --gpu-file)")
    return by_lower[name.lower()]


MAX_GPU_ENTRIES = 256  # a --gpu-file's entries: the plan search tries each (some 10 ms apiece)
MAX_GPU_NAME = 100


def read_gpu_file(path: Path, base: dict[str, GPU] | None = None) -> dict[str, GPU]:
    """A GPU file (``gpus: {NAME: {...}}``) read and every entry validated; KvplanError names the entry. An entry
    that names a GPU of ``base`` and sets only price fields keeps every other figure of that GPU."""
    from kvplan.files import load_yaml, shown

    data = load_yaml(path, what="GPU file")
    if not isinstance(data, dict) or not isinstance(data.get("gpus"), dict) or set(data) != {"gpus"}:
        raise KvplanError(f"{shown(path)}: a GPU file is a mapping with one key, gpus: {{NAME: {{memory_bytes: ...}}}}")
    if len(data["gpus"]) > MAX_GPU_ENTRIES:
        raise KvplanError(f"{shown(path)}: gpus: {len(data['gpus']):,} entries; allowed: at most {MAX_GPU_ENTRIES} "
                          "(each one is tried by the plan search)")
    out = {}
    for name, entry in data["gpus"].items():
        where = f"{shown(path)}: gpus.{clip(name) if not isinstance(name, str) else clip_text(name, 60)}"
        if not isinstance(name, str) or not name.strip():
            raise KvplanError(f"{where}: a GPU name is a non-empty string")
        if not isinstance(entry, dict):
            raise KvplanError(f"{where}: an entry is a mapping (memory_bytes, memory_bandwidth_bytes_per_s, "
                              f"peak_flops, ...), got {type(entry).__name__}")
        require_name(where, name, MAX_GPU_NAME)  # names reach tables, CSV, Markdown, workflow commands
        known = {k.lower(): v for k, v in (base or {}).items()}.get(name.lower())
        if known is not None and entry and set(entry) <= PRICE_FIELDS:
            name, entry = known.name, _price_only(known, entry)
        try:
            out[name] = GPU.model_validate({"name": name, **entry})
        except ValidationError as exc:
            raise KvplanError(f"{where}: {_describe(exc)}") from None
        if out[name].sm_count is not None and not out[name].sm_count_source:
            raise KvplanError(f"{where}: sm_count needs sm_count_source (the output or datasheet it was read from)")
        for field in ("vendor", "source", "visible_memory_source", "windows_visible_memory_source", "sm_count_source"):
            if getattr(out[name], field):
                require_line(f"{where}: {field}", getattr(out[name], field), 1000)
    return out


def _price_only(gpu: GPU, entry: dict[str, Any]) -> dict[str, Any]:
    """The bundled GPU's fields with ``entry``'s price (its source and date, or none: a price the catalog did not
    give keeps no source of the catalog's)."""
    fields = {k: v for k, v in _encode(gpu).items() if k not in ("$set", "name") and k not in PRICE_FIELDS}
    fields["peak_flops"] = {k: v for k, v in fields["peak_flops"].items() if k != "$set" and v is not None}
    return {**{k: v for k, v in fields.items() if v is not None}, **entry}


def _describe(exc: ValidationError) -> str:
    from kvplan.model.validation import describe_validation_error

    return describe_validation_error(exc, GPU)


# ---- the cache of the validated bundled catalog ------------------------------------------------------------------

def cache_key(yaml_bytes: bytes) -> str:
    """SHA-256 of the catalog's YAML and of this module's source (line ends as in a checkout on any system)."""
    parts = (yaml_bytes, Path(__file__).read_bytes())
    return hashlib.sha256(b"\0".join(p.replace(b"\r\n", b"\n") for p in parts)).hexdigest()


def cached_catalog() -> dict[str, GPU] | None:
    """The bundled catalog from the cache; None when there is none that matches ``gpus.yaml`` and this module."""
    entries = _cached_entries()
    return None if entries is None else {entry["name"]: _decode(entry) for entry in entries.values()}


@lru_cache(maxsize=1)
def _cached_entries() -> dict[str, dict[str, Any]] | None:
    """The cache's entries by lower-case name, undecoded; None when the cache does not match ``gpus.yaml``."""
    path = bundled_gpu_file()
    try:
        data = json.loads(path.with_name(CACHE_FILE).read_bytes())
        fresh = isinstance(data, dict) and data.get("key") == cache_key(path.read_bytes())
    except (OSError, ValueError):  # no cache, an unreadable one, or a module without its source file
        return None
    return {name.lower(): {**entry, "name": name} for name, entry in data["gpus"].items()} if fresh else None


def cache_text() -> str:
    """The cache file, made afresh from the bundled ``gpus.yaml``: one line an entry."""
    path = bundled_gpu_file()
    lines = [f"{json.dumps(name)}: {json.dumps(_encode(gpu), sort_keys=True)}"
             for name, gpu in read_gpu_file(path).items()]
    return f'{{"key": {json.dumps(cache_key(path.read_bytes()))}, "gpus": {{\n' + ",\n".join(lines) + "\n}}\n"


def _encode(model: GPU | PeakFlops) -> dict[str, Any]:
    fields = {name: getattr(model, name) for name in type(model).model_fields}
    if isinstance(model, GPU):
        fields["peak_flops"] = _encode(model.peak_flops)
    return {"$set": sorted(model.model_fields_set), **fields}


def _decode(entry: dict[str, Any]) -> GPU:
    """An entry of the cache as a GPU built with ``model_construct`` (no validation), with its fields set."""
    fields = {k: v for k, v in entry.items() if k != "$set"}
    flops = fields.pop("peak_flops")
    peak = PeakFlops.model_construct(set(flops["$set"]), **{k: v for k, v in flops.items() if k != "$set"})
    return GPU.model_construct(set(entry["$set"]), peak_flops=peak, **fields)


if __name__ == "__main__":  # python -m kvplan.cost.hardware: rewrite the cache after changing gpus.yaml
    import argparse

    from kvplan.files import write_atomic

    argparse.ArgumentParser(prog="python -m kvplan.cost.hardware", description=(
        f"Rewrite {bundled_gpu_file().with_name(CACHE_FILE)} (the validated GPU catalog) after changing "
        f"{bundled_gpu_file().name}.")).parse_args()
    write_atomic(bundled_gpu_file().with_name(CACHE_FILE), cache_text())
    print(f"wrote {bundled_gpu_file().with_name(CACHE_FILE)}")
