"""``kvplan verify``: build the reference model of a (shrunk) card, run prefill and decode, and compare what the
allocator saw with what kvplan predicts. Weights and KV bytes must match exactly (tolerance 0); peaks are predicted by
kvplan.verify.activations (relative tolerance 5%); FLOPs by kvplan.cost.flops (exact) where it models the card.

Torch is imported only inside ``verify`` (through kvplan.verify.reference.measure), never at module import, and
with Ctrl-C and SIGTERM held until the import ends (``reference_import``).
"""

from __future__ import annotations

import importlib
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, ConfigDict, computed_field

from kvplan.cost.engines import CacheRun
from kvplan.cost.runtimes import get_engine, names as runtime_names
from kvplan.errors import KvplanError
from kvplan.model.card import ModelCard
from kvplan.model.catalog import load_card
from kvplan.model.dtypes import parse_dtype
from kvplan.planning.estimate import estimate
from kvplan.verify import allocator
from kvplan.verify.activations import activation_peaks
from kvplan.verify.limits import check_fits_machine, check_time
from kvplan.verify.reference.shrink import REFERENCE_SSM_KINDS, require_reference_mixer, shrink
from kvplan.units import require_positive

VERIFY_SSM_KINDS = REFERENCE_SSM_KINDS
VERIFY_DTYPES = ("fp32", "bf16", "fp16")
PEAK_TOLERANCE = 0.05
_RESULT = ConfigDict(frozen=True, extra="forbid")


class Check(BaseModel):
    model_config = _RESULT
    name: str
    predicted: int | float | None  # None: no model for this card (informative only); float: an error bound
    measured: int | float | None
    tolerance: float  # allowed |measured - predicted| / predicted; 0: exact
    ok: bool | None  # None: informative (nothing predicted)
    note: str = ""


class VerifyResult(BaseModel):
    model_config = _RESULT
    model: str
    device: str
    engine: str
    kv_dtype: str
    batch: int
    seq_len: int
    prompt_len: int
    decode_steps: int
    encoder_len: int | None
    block_size: int
    max_cache_len: int | None
    params: int
    shrunk: list[str]
    checks: list[Check]

    @computed_field
    @property
    def ok(self) -> bool:
        return all(c.ok is not False for c in self.checks)


def verify(model: ModelCard | str | Path, *, batch: int = 1, seq_len: int = 32, engine: str = "ideal",
           kv_dtype: str | None = None, device: str = "cpu", layers: int | None = None, scale: float | None = None,
           decode_steps: int = 2, block_size: int = 16, encoder_len: int | None = None,
           max_cache_len: int | None = None, seed: int = 0) -> VerifyResult:
    """Measure the reference model of ``model`` (shrunk by ``layers``/``scale``) and compare with kvplan."""
    base = model if isinstance(model, ModelCard) else load_card(model)
    require_reference_mixer(base)  # the reference SSMixer (reference/ssm.py)
    card, shrunk = shrink(base, layers=layers, scale=scale, seq_len=seq_len)
    dtype = parse_dtype(kv_dtype or get_engine("ideal").default_dtype(card.dtype)[0], what="--kv-dtype").name
    _check_inputs(card, engine, dtype, device, batch, seq_len, decode_steps, encoder_len)
    steps = decode_steps if card.has_kv_cache else 0
    prompt_len = seq_len - steps
    enc_len = (encoder_len or prompt_len) if card.architecture == "encoder-decoder" else None
    est = estimate(card, batch=batch, seq_len=seq_len, encoder_len=enc_len, kv_dtype=dtype, weight_dtype=dtype,
                   engine=engine, max_cache_len=max_cache_len,
                   block_size=block_size if get_engine(engine).takes_estimate_block else None,
                   engine_groups=False)  # the reference cache pages layer by layer
    mcl = est.inputs.max_cache_len
    act = activation_peaks(card, batch=batch, prompt_len=prompt_len, dtype=dtype, engine=engine, decode_steps=steps,
                           encoder_len=enc_len, max_cache_len=mcl, block_size=block_size, device=device)
    check_fits_machine(act.peak_prefill_bytes, act.peak_decode_bytes, device, steps, prompt_len, batch)
    check_time(_run_flops(est, steps, batch * seq_len), device, dtype)
    m = _measure(card, batch=batch, prompt_len=prompt_len, decode_steps=steps, engine=engine, dtype=dtype,
                 device=device, encoder_len=enc_len or 0, max_cache_len=mcl or 0, block_size=block_size, seed=seed)
    kv_pred, w_pred = est.kv_cache.total_bytes, est.weights.bytes
    if device.startswith("cuda"):  # memory_allocated counts 512-byte-rounded blocks (kvplan.verify.allocator)
        run = CacheRun(seq_len, enc_len or 0, mcl, block_size)
        kv_pred = allocator.memory_allocated(allocator.kv_tensor_bytes(card, parse_dtype(dtype), get_engine(engine),
                                                                       run, batch))
        w_pred = allocator.memory_allocated(m.param_bytes)
    checks = [
        _check("params", est.weights.params, m.params, 0.0),
        _check("weights_bytes", w_pred, m.weights_bytes, 0.0),
        _check("kv_cache_bytes", kv_pred, m.kv_bytes, 0.0),
    ]
    checks += _peak_checks(card, act, m, steps)
    checks += _flops_checks(card, m, batch=batch, prompt_len=prompt_len, seq_len=seq_len, engine=engine, mcl=mcl,
                            encoder_len=enc_len or 0)
    return VerifyResult(model=card.name, device=device, engine=engine, kv_dtype=dtype, batch=batch, seq_len=seq_len,
                        prompt_len=prompt_len, decode_steps=steps, encoder_len=enc_len, block_size=block_size,
                        max_cache_len=mcl, params=m.params, shrunk=shrunk, checks=checks)


def _peak_checks(card: ModelCard, act, m, steps: int) -> list[Check]:
    """The prefill peak, and the decode peak when there are decode steps: predicted, or only measured for state
    cards."""
    # kvplan.verify.activations has no term for a mamba mixer's transients (its scan, conv window and projections
    # of the inner width): for state cards the peaks are measured and shown, not predicted
    peaks = [("peak_prefill_bytes", act.peak_prefill_bytes, m.peak_prefill_bytes)]
    if steps:
        peaks.append(("peak_decode_bytes", act.peak_decode_bytes, m.peak_decode_bytes))
    return [_check(name, None, got, PEAK_TOLERANCE, STATE_PEAK_NOTE) if card.ssm
            else _check(name, pred, got, PEAK_TOLERANCE) for name, pred, got in peaks]


def _run_flops(est, steps: int, tokens: int) -> int:
    """Matmul FLOPs of the whole run: the prefill and every decode step (encoder-only: 2 x params x tokens)."""
    if est.flops is None:
        return 2 * est.weights.params * tokens
    return est.flops.prefill.total + steps * est.flops.decode_step.total


STATE_PEAK_NOTE = ("informative: the activation model (kvplan.verify.activations) has no term for state-space "
                   "mixer transients")
TORCH_INSTALL = 'pip install "torch==2.13.0"  (the CPU wheel; an unpinned torch pulls a multi-GB CUDA build)'


def _measure(card: ModelCard, **kw):
    return reference_import("kvplan.verify.reference.measure").measure(card, **kw)


@contextmanager
def signals_held():
    """Ctrl-C and SIGTERM that arrive inside the block are recorded and delivered when it ends, with the handlers in
    force before (the CLI's: KeyboardInterrupt, ``Terminated``; exit 130 / 143), so that they reach kvplan's code
    rather than whatever the block was running. Held by Python-level handlers that record the signal (they run in the
    main thread whichever thread the kernel picks; a blocked mask would cover the main thread only, and torch's threads
    would take the signal). Outside the main thread (only it may set handlers) the block runs unguarded."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    before = {sig: signal.signal(sig, lambda signum, _frame: caught.append(signum)) for sig in held}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        if caught:
            signal.raise_signal(caught[0])


def reference_import(name: str = "torch"):
    """Import ``name`` (torch, or a kvplan module that imports it) with the signals held (``signals_held``); a torch
    that is missing or broken is one KvplanError line (exit 2).

    A KeyboardInterrupt raised inside torch's import was lost: torch._C's initialisation imports numpy from C and
    clears a failure there (numpy is optional to torch), so the run went on and exited 0 with "all checks pass"; and
    numpy, half-initialised, then refused its next import ("cannot load module more than once per process"), which
    came out as "verify needs torch (...)", exit 2. Held, the signal is acted on when the import returns (within the
    import's second or two), as a KeyboardInterrupt in kvplan's code; a signal wins over an ImportError it may have
    caused."""
    with signals_held():
        try:
            return importlib.import_module(name)
        except ImportError as exc:
            raise KvplanError(f"verify needs torch ({exc}); install it: {TORCH_INSTALL}") from None


def _check(name: str, predicted: int | None, measured: int | None, tol: float, note: str = "") -> Check:
    if predicted is None or measured is None:
        return Check(name=name, predicted=predicted, measured=measured, tolerance=tol, ok=None, note=note)
    ok = measured == predicted if tol == 0 else abs(measured - predicted) <= tol * predicted
    return Check(name=name, predicted=predicted, measured=measured, tolerance=tol, ok=ok, note=note)


def _flops_checks(card: ModelCard, m, *, batch: int, prompt_len: int, seq_len: int, engine: str,
                  mcl: int | None, encoder_len: int) -> list[Check]:
    """Exact against kvplan.cost.flops where it models the card; informative (no prediction) otherwise."""
    from kvplan.cost import flops

    kw = dict(batch=batch, engine=get_engine(engine), max_cache_len=mcl, encoder_len=encoder_len)
    try:
        pre = _elementwise_states(flops.prefill_flops(card, prompt_len=prompt_len, **kw))
        # the last step: seq_len - 1 tokens cached, the new one makes seq_len
        dec = _elementwise_states(flops.decode_step_flops(card, cache_len=seq_len - 1, **kw)) \
            if m.decode_step_flops else None
        note = STATE_FLOPS_NOTE if card.ssm else ""
    except KvplanError as exc:
        pre = dec = None
        note = f"informative: {exc}"
    checks = [_check("prefill_flops", pre, m.prefill_flops, 0.0, note)]
    if m.decode_step_flops is not None:
        checks.append(_check("decode_step_flops", dec, m.decode_step_flops, 0.0, note))
    return checks


STATE_FLOPS_NOTE = ("the reference mixer runs its conv and scan elementwise (kvplan.verify.reference.ssm): predicted "
                    "without kvplan's state_conv and state_scan, which tests pin against transformers")


def _elementwise_states(f) -> int:
    """kvplan's FLOPs of the step as the reference model runs it: its state mixers' conv and scan are elementwise."""
    return f.total - f.state_conv - f.state_scan


def _check_inputs(card: ModelCard, engine: str, dtype: str, device: str, batch: int, seq_len: int,
                  decode_steps: int, encoder_len: int | None) -> None:
    if not get_engine(engine).reference_cache:
        known = [n for n in runtime_names() if get_engine(n).reference_cache]
        raise KvplanError(f"--engine: verify implements {', '.join(known)} caches; got {engine!r}")
    if dtype not in VERIFY_DTYPES:
        raise KvplanError(f"--kv-dtype: the reference caches store {', '.join(VERIFY_DTYPES)}; got {dtype}")
    if device != "cpu" and not device.startswith("cuda"):
        raise KvplanError(f"--device: cpu or cuda, got {device!r}")
    if batch < 1 or seq_len < 2:
        raise KvplanError(f"--batch and --seq-len: need batch >= 1 and seq_len >= 2, got {batch} and {seq_len}")
    if encoder_len is not None:
        require_positive("--encoder-len", encoder_len)
    if encoder_len is not None and card.architecture != "encoder-decoder":
        raise KvplanError(f"--encoder-len: only for encoder-decoder models; {card.name} is {card.architecture}")
    card.require_no_shared_blocks("verify (the reference model)")
    if card.has_kv_cache and not 1 <= decode_steps < seq_len:
        raise KvplanError(f"--decode-steps: need 1 <= steps < seq_len ({seq_len}), got {decode_steps}")
    if device.startswith("cuda"):
        torch = reference_import("torch")
        if not torch.cuda.is_available():
            raise KvplanError("--device cuda: no CUDA device is available (torch.cuda.is_available() is False)")
