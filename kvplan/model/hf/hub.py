"""Hugging Face Hub ids (``ORG/NAME[@REVISION]``) as models, through ``huggingface_hub``.

What is read: ``config.json`` (``hf_hub_download``: the Hub cache, ``HF_HOME`` / ``HF_HUB_CACHE``, ``HF_ENDPOINT``,
``HF_TOKEN`` or a saved login, ``HF_HUB_OFFLINE``, its timeouts and retries) and the safetensors headers
(``HfApi.get_safetensors_metadata``: the index, then ranged reads of each shard's first bytes), never the weights.
The headers, summarised per tensor, are kept in huggingface_hub's assets cache under the commit they were read at
(immutable), so ``HF_HUB_OFFLINE=1`` answers from the cache with the same numbers.
huggingface_hub is an optional extra: it is imported only when a Hub id is asked for.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import ModuleType

from kvplan.errors import KvplanError, clip_text
from kvplan.files import load_json, write_atomic
from kvplan.model.card import ModelCard
from kvplan.model.hf.checkpoint import Checkpoint, Tensor, parse_hub_id
from kvplan.model.hf.config import card_yaml, import_hf_config

EXTRA = "pip install 'kvplan[hub]'"
INDEX = "model.safetensors.index.json"
SUMMARY = "safetensors.json"  # in the assets cache: hub/<repo>/<commit>/safetensors.json


@dataclass(frozen=True)
class HubModel:
    """A Hub model read at one commit: its card, the transformers defaults the card assumed, its checkpoint."""

    repo: str
    revision: str | None  # as asked for (None: main)
    commit: str
    card: ModelCard
    assumed: tuple[str, ...]
    checkpoint: Checkpoint | None  # None: no safetensors files (or, offline, none cached)


def load_hub_model(hub_id: str, *, name: str | None = None) -> HubModel:
    """The model ``ORG/NAME[@REVISION]`` names; a KvplanError naming the repo and what to do when it cannot be read."""
    parsed = parse_hub_id(hub_id)
    if parsed is None:
        raise KvplanError(f"{clip_text(hub_id)}: not a Hugging Face Hub id; allowed: ORG/NAME or ORG/NAME@REVISION")
    hf = _hub(hub_id)
    c = hf.constants
    return _load(parsed[0], parsed[1], name, c.ENDPOINT, c.HF_HUB_CACHE, c.HF_ASSETS_CACHE, c.is_offline_mode())


@lru_cache(maxsize=16)  # keyed on what huggingface_hub reads from the environment too
def _load(repo: str, revision: str | None, name: str | None, endpoint: str, cache: str, assets: str,
          offline: bool) -> HubModel:
    hf = _hub(repo)
    label = repo if revision is None else f"{repo}@{revision}"
    with _one_line(hf, label, revision, endpoint, cache, offline), _quiet(hf):
        config = Path(hf.hf_hub_download(repo, "config.json", revision=revision))
        commit = config.parent.name  # <cache>/models--ORG--NAME/snapshots/<commit>/config.json
        checkpoint = _checkpoint(hf, repo, commit, Path(assets), offline)
    data = load_json(config, what="config.json")
    if not isinstance(data, dict):
        raise KvplanError(f"{label}: config.json is not a JSON object; allowed: a transformers config")
    card, assumed = import_hf_config(data, name=name or repo.split("/")[1], origin=f"{label}: config.json",
                                     source=f"{endpoint.rstrip('/')}/{repo}/blob/{commit}/config.json")
    return HubModel(repo, revision, commit, card, tuple(assumed), checkpoint)


def hub_card_yaml(hub: HubModel) -> str:
    """The card as YAML (``card_yaml``), its header naming the commit and the checkpoint's bytes as read."""
    c = hub.checkpoint
    size = c and c.total_bytes
    ckpt = (f"# checkpoint {hub.repo}@{hub.commit}: no safetensors files" if size is None else
            f"# checkpoint {hub.repo}@{hub.commit}: {size:,} B of tensors"
            + (f" in {len(c.tensors):,} tensors, {c.files} safetensors files" if c.tensors else " (index total_size)"))
    head, _, body = card_yaml(hub.card, list(hub.assumed)).partition("\n")
    return f"{head}\n{ckpt}\n{body}"


def _hub(what: str) -> ModuleType:
    try:
        import huggingface_hub
        import huggingface_hub.constants  # noqa: F401 - the submodules used as attributes below
        import huggingface_hub.errors  # noqa: F401
        import huggingface_hub.utils  # noqa: F401
    except ImportError:
        raise KvplanError(f"{clip_text(what)}: a Hugging Face Hub id needs huggingface_hub: {EXTRA} (or give a "
                          "bundled card name, a card .yaml or --hf-config PATH)") from None
    return huggingface_hub


def _checkpoint(hf: ModuleType, repo: str, commit: str, assets: Path, offline: bool) -> Checkpoint | None:
    """The safetensors headers at ``commit``: from the assets cache, else read (online) and cached; offline without
    them, the index's total_size from the Hub cache where it is there."""
    folder = hf.cached_assets_path("kvplan", namespace=repo.replace("/", "--"), subfolder=commit, assets_dir=assets)
    summary = folder / SUMMARY
    if summary.is_file():
        try:
            return Checkpoint.from_json(summary.read_text(encoding="utf-8"))
        except (ValueError, KeyError, TypeError, OSError):  # a damaged cache file: read the headers again
            pass
    if offline:
        try:
            index = load_json(hf.hf_hub_download(repo, INDEX, revision=commit), what=INDEX)
        except hf.errors.EntryNotFoundError:
            return None
        return Checkpoint(repo, commit, _total_size(index), (), 0)
    try:
        meta = hf.HfApi().get_safetensors_metadata(repo, revision=commit)
    except hf.errors.NotASafetensorsRepoError:
        return None
    tensors = sorted((Tensor(name, info.dtype, info.parameter_count, info.data_offsets[1] - info.data_offsets[0])
                      for file in meta.files_metadata.values() for name, info in file.tensors.items()),
                     key=lambda t: t.name)
    total = (meta.metadata or {}).get("total_size")
    result = Checkpoint(repo, commit, total if isinstance(total, int) else None, tuple(tensors),
                        len(meta.files_metadata))
    try:
        write_atomic(summary, result.to_json())
    except (OSError, KvplanError):  # a read-only cache: the numbers stand, only the next offline run lacks them
        pass
    return result


def _total_size(index: object) -> int | None:
    total = index.get("metadata", {}).get("total_size") if isinstance(index, dict) else None
    return total if isinstance(total, int) and not isinstance(total, bool) else None


@contextmanager
def _quiet(hf: ModuleType):
    """No progress bars or retry warnings from huggingface_hub: stderr carries kvplan's one-line errors."""
    bars = hf.utils.are_progress_bars_disabled()
    logger = hf.utils.logging.get_logger("huggingface_hub")
    level = logger.level
    hf.utils.disable_progress_bars()
    logger.setLevel("ERROR")
    try:
        yield
    finally:
        logger.setLevel(level)
        if not bars:
            hf.utils.enable_progress_bars()


@contextmanager
def _one_line(hf: ModuleType, label: str, revision: str | None, endpoint: str, cache: str, offline: bool):
    """huggingface_hub's exceptions as one line naming the repo and what to do."""
    e = hf.errors
    try:
        yield
    except e.GatedRepoError:  # before RepositoryNotFoundError, its base class
        raise KvplanError(f"{label}: a gated repository; accept its terms on the Hub, then set HF_TOKEN (or run "
                          "`hf auth login`) with a token that may read it") from None
    except e.RepositoryNotFoundError:
        raise KvplanError(f"{label}: no such repository on {endpoint} (or a private one: set HF_TOKEN); allowed: a "
                          "bundled card name (`kvplan cards list`), a card .yaml, or ORG/NAME of a Hub model") from None
    except e.RevisionNotFoundError:
        raise KvplanError(f"{label}: no revision {revision!r}; allowed: a branch, tag or commit of the "
                          "repository") from None
    except (e.LocalEntryNotFoundError, e.OfflineModeIsEnabled):  # before EntryNotFoundError, a base class
        if offline:
            raise KvplanError(f"{label}: not in the Hugging Face cache ({clip_text(cache)}) and HF_HUB_OFFLINE is "
                              "set; run once online (or unset HF_HUB_OFFLINE)") from None
        raise KvplanError(f"{label}: cannot reach {endpoint} and it is not in the Hugging Face cache; check the "
                          "network (or HF_ENDPOINT), or run once online") from None
    except e.EntryNotFoundError:
        raise KvplanError(f"{label}: the repository has no config.json; allowed: a transformers model repository "
                          "(or a local config.json with --hf-config)") from None
    except (e.HfHubHTTPError, e.SafetensorsParsingError, e.HFValidationError) as exc:
        raise KvplanError(f"{label}: {_first_line(exc)}") from None
    except Exception as exc:
        if not _transport_error(exc):
            raise
        raise KvplanError(f"{label}: cannot reach {endpoint} ({type(exc).__name__}); check the network (or "
                          "HF_ENDPOINT), or set HF_HUB_OFFLINE=1 to answer from the cache") from None


def _first_line(exc: Exception) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return clip_text(" ".join(lines[:2]) or type(exc).__name__)


def _transport_error(exc: Exception) -> bool:
    """A connection or timeout error of huggingface_hub's HTTP client (httpx2 in 2.x, httpx in 1.x)."""
    return isinstance(exc, (OSError, TimeoutError)) or any(
        cls.__module__.split(".")[0] in ("httpx", "httpx2") for cls in type(exc).__mro__)
