"""RetrievalMemory: a FAISS index of key vectors with stable integer ids and optional payloads.

The index is chosen by a FAISS factory string: ``"Flat"`` (exact), ``"IVF1024,Flat"`` (inverted
lists), ``"IVF1024,PQ32"`` (inverted lists + product quantisation), ``"HNSW32"`` (graph), or any
other factory string. Similarity is ``"cosine"`` (keys and queries L2-normalised, inner product),
``"ip"`` (inner product) or ``"l2"`` (squared Euclidean distance; smaller is closer). Ids are kept
by an ``IndexIDMap2``, so they survive removals and save/load. The index runs on a GPU when faiss
sees one (``faiss-gpu``) and is copied back to the CPU to be saved.

    memory = RetrievalMemory(256, "IVF256,Flat", metric="cosine")
    ids = memory.add(keys, values=token_ids)       # trains the IVF quantiser on first add
    scores, found = memory.search(queries, k=10)   # [Q, 10] each; id -1 where fewer exist
    memory.remove(ids[:5]); memory.save("mem/"); RetrievalMemory.load("mem/", dim=256, metric="cosine")

Indexes that cannot delete vectors (HNSW, most GPU indexes) hide removed ids with a search-time
selector instead; their vectors stay in the graph until the memory is rebuilt.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from .._files import read_json_object, replace_owned_folder, write_json_atomic
from ..errors import BabelzooError, ConfigError
from ..typed import Where, check

METRICS = ("cosine", "ip", "l2")
FORMAT = 1


class MemoryFormatError(BabelzooError, ValueError):
    """Invalid memory input, or a saved memory that does not match what the caller expects."""


# the fields of memory.json and their types (a foreign or hand-edited file is refused naming the field)
META_TYPES = {"format": int, "dim": int, "metric": str, "index": str, "count": int, "next_id": int,
              "hidden": list[int], "search_params": dict[str, Any], "values": bool, "metric_seal": str}


def _metric_seals(index_file: Path) -> dict[str, str]:
    """For each metric, the seal ``memory.json`` records when a memory of that metric saved
    ``index_file``: sha256 of the file's bytes and the metric's name. FAISS stores cosine and
    inner-product indexes alike (both rank by inner product), so only the seal tells them apart."""
    digest = hashlib.sha256()
    with open(index_file, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    seals = {}
    for metric in METRICS:
        sealed = digest.copy()
        sealed.update(b"\0metric=" + metric.encode("ascii"))
        seals[metric] = sealed.hexdigest()
    return seals


def _check_metric(directory: Path, meta: dict, index, faiss) -> None:
    """The metric ``memory.json`` names must be the one the saved index was built with: a
    cosine memory read as inner product (or the reverse) would rank the same keys but mislabel
    every score."""
    meta_path, index_file = directory / "memory.json", directory / "index.faiss"
    if "metric_seal" in meta:
        seals = _metric_seals(index_file)
        if meta["metric_seal"] != seals[meta["metric"]]:
            saved = [m for m, seal in seals.items() if seal == meta["metric_seal"]]
            if saved:
                raise MemoryFormatError(f"{meta_path}: says metric {meta['metric']!r}, but {index_file.name} was "
                                        f"saved by {'a' if saved[0] == 'cosine' else 'an'} {saved[0]!r} memory: its scores would be mislabelled; restore "
                                        f"\"metric\": \"{saved[0]}\" or rebuild the memory")
            raise MemoryFormatError(f"{meta_path}: {index_file.name} is not the index saved with this memory.json "
                                    "(its metric_seal does not match); restore the pair, or rebuild the memory")
        return
    # a memory saved before seals: a cosine index holds unit vectors, which exact storage shows
    if meta["metric"] != "cosine" or index.ntotal == 0:
        return
    inner = faiss.downcast_index(index.index)
    storage = faiss.downcast_index(inner.storage) if hasattr(inner, "storage") else inner
    if not isinstance(storage, faiss.IndexFlat):
        return
    keys = storage.reconstruct_n(0, min(storage.ntotal, 4096))
    norms = np.linalg.norm(keys, axis=1)
    if np.abs(norms - 1).max() > 1e-3:
        raise MemoryFormatError(f"{meta_path}: says metric 'cosine', but {index_file.name} holds keys of norm "
                                f"{norms.min():.3g} to {norms.max():.3g}, not unit vectors: it was saved by an 'ip' "
                                "memory, and its scores would be mislabelled; restore \"metric\": \"ip\"")


def _read_values(path: Path) -> dict[str, torch.Tensor]:
    """``values.safetensors`` of a saved memory: its ``ids`` and ``values`` tensors, or a
    :class:`MemoryFormatError` naming the file (safetensors' own errors name neither)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    if not path.is_file():
        raise MemoryFormatError(f"{path}: missing or not a file (memory.json says the memory holds values)")
    try:
        stored = load_file(str(path))
    except SafetensorError as err:
        raise MemoryFormatError(f"{path}: not a readable safetensors file ({err})") from None
    missing = sorted({"ids", "values"} - set(stored))
    if missing:
        raise MemoryFormatError(f"{path}: no {' or '.join(missing)} tensor")
    return stored


def _faiss():
    from .._lazy import faiss  # lazy: importing babelzoo never loads faiss

    return faiss()


def _as_array(x, dim: int, what: str) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().to("cpu", torch.float32).numpy()
    x = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    if x.ndim != 2 or x.shape[1] != dim:
        raise MemoryFormatError(f"{what} must be [N, {dim}], got shape {tuple(x.shape)}")
    if not np.isfinite(x).all():
        raise MemoryFormatError(f"{what} contains NaN or infinite values")
    return x


class RetrievalMemory:
    """A FAISS-backed key store; see the module docstring."""

    def __init__(self, dim: int, index: str = "Flat", metric: str = "cosine", device: str = "auto",
                 nprobe: Optional[int] = None, ef_search: Optional[int] = None):
        if metric not in METRICS:
            raise MemoryFormatError(f"metric={metric!r} must be one of {', '.join(METRICS)}")
        if not isinstance(dim, int) or dim <= 0:
            raise MemoryFormatError(f"dim={dim!r} must be a positive integer")
        faiss = _faiss()
        self.dim, self.factory, self.metric, self.device = dim, index, metric, device
        faiss_metric = faiss.METRIC_L2 if metric == "l2" else faiss.METRIC_INNER_PRODUCT
        try:
            inner = faiss.index_factory(dim, index, faiss_metric)
        except RuntimeError as err:
            raise MemoryFormatError(f"invalid FAISS factory string {index!r}: {err}") from None
        self._wrap(inner)
        self.next_id = 0
        self._ids: set[int] = set()
        self._hidden: set[int] = set()  # removed ids that the index could not delete
        self._value_ids = np.empty(0, dtype=np.int64)  # sorted ids of the payload rows
        self._value_data: Optional[torch.Tensor] = None
        self.search_params: dict[str, float] = {}
        self.set_search_params(nprobe, ef_search)

    # --- device ---------------------------------------------------------------------------------
    def _wrap(self, inner, ids: Optional[np.ndarray] = None, owner=None) -> None:
        """Put the (CPU) ``inner`` index on the device and wrap it in an ``IndexIDMap2``. Python
        references keep every FAISS object alive as long as the memory (no double ownership)."""
        faiss = _faiss()
        self._cpu_owner = owner  # e.g. the IDMap read from disk, which owns ``inner``
        self._inner = self._to_device(inner)
        if owner is not None and self._inner is inner:
            self._index = owner  # already id-mapped, on the CPU
            return
        self._index = faiss.IndexIDMap2(self._inner)
        if ids is not None:
            faiss.copy_array_to_vector(ids, self._index.id_map)
            self._index.construct_rev_map()

    def _to_device(self, inner):
        faiss = _faiss()
        gpus = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
        self.on_gpu = False
        if self.device == "cpu" or gpus == 0:
            if self.device == "cuda":
                raise MemoryFormatError("device='cuda' but faiss sees no GPU (install faiss-gpu)")
            return inner
        try:
            moved = faiss.index_cpu_to_all_gpus(inner)
        except RuntimeError:  # an index type without a GPU implementation (e.g. HNSW) stays on the CPU
            if self.device == "cuda":
                raise
            return inner
        self.on_gpu = True
        return moved

    def set_search_params(self, nprobe: Optional[int] = None, ef_search: Optional[int] = None,
                          **params: float) -> None:
        """IVF lists probed per query (``nprobe``), HNSW search breadth (``ef_search``), and any
        other FAISS ``ParameterSpace`` setting by name (e.g. ``k_factor_rf=4`` for the re-ranking
        of a ``...,RFlat`` index). Settings persist through save/load."""
        faiss = _faiss()
        space = faiss.GpuParameterSpace() if self.on_gpu else faiss.ParameterSpace()
        named = {"nprobe": nprobe, "efSearch": ef_search, **params}
        for name, value in named.items():
            if value is not None:
                if not isinstance(value, (int, float)) or isinstance(value, bool):
                    raise MemoryFormatError(f"{name}={value!r} must be a number")  # FAISS would raise a TypeError
                try:
                    space.set_index_parameter(self._inner, name, value)
                except RuntimeError:
                    raise MemoryFormatError(f"{name}={value} does not apply to index {self.factory!r}") from None
        self.search_params = {**getattr(self, "search_params", {}),
                              **{k: v for k, v in named.items() if v is not None}}

    @property
    def nprobe(self) -> Optional[int]:
        return self.search_params.get("nprobe")

    @property
    def ef_search(self) -> Optional[int]:
        return self.search_params.get("efSearch")

    # --- contents --------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._ids)

    @property
    def is_trained(self) -> bool:
        return bool(self._index.is_trained)

    def _prepare(self, x, what: str) -> np.ndarray:
        x = _as_array(x, self.dim, what)
        if self.metric == "cosine":
            norms = np.linalg.norm(x, axis=1, keepdims=True)
            x = x / np.maximum(norms, 1e-12)
        return x

    def train(self, keys) -> None:
        """Train the index's quantisers (IVF, PQ) on representative keys."""
        x = self._prepare(keys, "keys")
        try:
            self._index.train(x)
        except RuntimeError as err:
            raise MemoryFormatError(f"training index {self.factory!r} on {len(x)} keys failed: {err}") from None

    def add(self, keys, ids=None, values=None) -> torch.Tensor:
        """Add keys [N, dim] under ``ids`` (default: the next free ids) with optional payload
        ``values`` [N, ...] (a tensor). An untrained index is trained on these keys first.
        Returns the ids as a LongTensor."""
        x = self._prepare(keys, "keys")
        n = len(x)
        if ids is None:
            new_ids = np.arange(self.next_id, self.next_id + n, dtype=np.int64)
        else:
            new_ids = np.asarray(ids.cpu() if isinstance(ids, torch.Tensor) else ids, dtype=np.int64).reshape(-1)
            if len(new_ids) != n:
                raise MemoryFormatError(f"got {len(new_ids)} ids for {n} keys")
            if (new_ids < 0).any():
                raise MemoryFormatError("ids must be non-negative")
        removed = sorted(set(new_ids.tolist()) & self._hidden)
        if removed:
            raise MemoryFormatError(f"ids {removed[:10]}{' ...' if len(removed) > 10 else ''} were removed, but index "
                                    f"{self.factory!r} cannot delete vectors: they stay in it, hidden from searches, "
                                    "so their ids cannot be reused; add without ids= (new ids are assigned) or "
                                    "rebuild the memory from the keys you keep")
        clash = sorted(set(new_ids.tolist()) & self._ids) or \
            sorted(i for i, c in zip(*np.unique(new_ids, return_counts=True)) if c > 1)
        if clash:
            raise MemoryFormatError(f"ids already in the memory or repeated: {clash[:10]}"
                                    f"{' ...' if len(clash) > 10 else ''}")
        if values is not None:
            values = torch.as_tensor(values).detach().cpu()
            if values.shape[0] != n:
                raise MemoryFormatError(f"got {values.shape[0]} values for {n} keys")
            if self._value_data is not None and (values.shape[1:] != self._value_data.shape[1:]
                                                 or values.dtype != self._value_data.dtype):
                raise MemoryFormatError(f"values must all be {tuple(self._value_data.shape[1:])} "
                                        f"{self._value_data.dtype}; got {tuple(values.shape[1:])} {values.dtype}")
            if self._value_data is None and len(self):
                raise MemoryFormatError("this memory was filled without values: values= cannot start now")
        elif self._value_data is not None:
            raise MemoryFormatError("this memory stores values: give values= with every add")
        if not self._index.is_trained:
            self.train(x)
        self._index.add_with_ids(x, new_ids)
        self._ids.update(new_ids.tolist())
        self.next_id = max(self.next_id, int(new_ids.max()) + 1 if n else self.next_id)
        if values is not None:
            all_ids = np.concatenate([self._value_ids, new_ids])
            data = values if self._value_data is None else torch.cat([self._value_data, values])
            order = np.argsort(all_ids, kind="stable")
            self._value_ids, self._value_data = all_ids[order], data[torch.from_numpy(order)]
        return torch.from_numpy(new_ids)

    def remove(self, ids) -> int:
        """Remove entries by id; every id must be present. Returns how many were removed."""
        wanted = np.asarray(ids.cpu() if isinstance(ids, torch.Tensor) else ids, dtype=np.int64).reshape(-1)
        missing = sorted(set(wanted.tolist()) - self._ids)
        if missing:
            raise MemoryFormatError(f"ids not in the memory: {missing[:10]}{' ...' if len(missing) > 10 else ''}")
        faiss = _faiss()
        try:
            removed = int(self._index.remove_ids(faiss.IDSelectorBatch(wanted)))
        except RuntimeError:
            removed = 0
        if removed != len(set(wanted.tolist())):  # the index cannot delete: hide them at search time
            self._hidden.update(wanted.tolist())
        self._ids.difference_update(wanted.tolist())
        if self._value_data is not None:
            keep = ~np.isin(self._value_ids, wanted)
            self._value_ids, self._value_data = self._value_ids[keep], self._value_data[torch.from_numpy(keep)]
        return len(set(wanted.tolist()))

    def search(self, queries, k: int = 10) -> tuple[torch.Tensor, torch.Tensor]:
        """The ``k`` nearest keys of each query: (scores [Q, k], ids [Q, k]). Scores are
        similarities (cosine, ip; higher is closer) or squared distances (l2; lower is closer).
        Missing results (fewer than k entries) have id -1."""
        faiss = _faiss()
        x = self._prepare(queries, "queries")
        if k <= 0:
            raise MemoryFormatError(f"k={k} must be positive")
        if not self._hidden:
            scores, ids = self._index.search(x, k)
            return torch.from_numpy(scores), torch.from_numpy(ids)
        hidden = np.fromiter(self._hidden, dtype=np.int64)
        try:
            params = self._search_parameters(faiss.IDSelectorNot(faiss.IDSelectorBatch(hidden)))
            scores, ids = self._index.search(x, k, params=params)
        except RuntimeError:  # an index without search-time selectors (GPU): over-fetch, then filter
            scores, ids = self._index.search(x, k + len(hidden))
            keep = ~np.isin(ids, hidden)
            order = np.argsort(~keep, axis=1, kind="stable")[:, :k]  # kept results first, in rank order
            scores, ids = np.take_along_axis(scores, order, 1), np.take_along_axis(ids, order, 1)
            ids = np.where(np.take_along_axis(keep, order, 1), ids, -1)
        return torch.from_numpy(np.ascontiguousarray(scores)), torch.from_numpy(np.ascontiguousarray(ids))

    def _search_parameters(self, selector):
        faiss = _faiss()
        inner = faiss.downcast_index(self._inner)
        if hasattr(inner, "hnsw"):
            return faiss.SearchParametersHNSW(sel=selector, efSearch=inner.hnsw.efSearch)
        try:
            ivf = faiss.extract_index_ivf(inner)
        except RuntimeError:
            return faiss.SearchParameters(sel=selector)
        return faiss.SearchParametersIVF(sel=selector, nprobe=ivf.nprobe)

    def values(self, ids) -> torch.Tensor:
        """Payloads of ``ids`` (any shape) → [*ids.shape, *value_shape]; id -1 (no result) gives
        zeros."""
        if self._value_data is None:
            raise MemoryFormatError("this memory stores no values")
        ids_t = torch.as_tensor(ids)
        flat = ids_t.reshape(-1).cpu().numpy().astype(np.int64)
        present = flat >= 0
        rows = np.searchsorted(self._value_ids, flat).clip(0, max(len(self._value_ids) - 1, 0))
        if len(self._value_ids) == 0 or (present & (self._value_ids[rows] != flat)).any():
            missing = sorted(set(flat[present].tolist()) - set(self._value_ids.tolist()))
            raise MemoryFormatError(f"ids not in the memory: {missing[:10]}")
        out = self._value_data[torch.from_numpy(rows)] if len(self._value_ids) else self._value_data[:0]
        out = out.clone()
        out[torch.from_numpy(~present)] = 0
        return out.reshape(*ids_t.shape, *self._value_data.shape[1:])

    def ids(self) -> torch.Tensor:
        return torch.tensor(sorted(self._ids), dtype=torch.long)

    # --- persistence ----------------------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:
        """Write ``index.faiss`` (a CPU copy), ``memory.json`` (dim, metric, factory, ids state)
        and, with payloads, ``values.safetensors``, replacing a memory babelzoo saved there; a
        folder holding anything else is refused untouched."""
        faiss = _faiss()
        index = self._index
        if self.on_gpu:
            cpu_inner = faiss.index_gpu_to_cpu(self._inner)
            index = faiss.IndexIDMap2(cpu_inner)
            faiss.copy_array_to_vector(faiss.vector_to_array(self._index.id_map), index.id_map)
        meta = {"format": FORMAT, "dim": self.dim, "metric": self.metric, "index": self.factory,
                "count": len(self), "next_id": self.next_id, "hidden": sorted(self._hidden),
                "search_params": self.search_params, "values": self._value_data is not None,
                "faiss_version": getattr(faiss, "__version__", "unknown")}

        def write(folder: Path) -> None:
            faiss.write_index(index, str(folder / "index.faiss"))
            meta["metric_seal"] = _metric_seals(folder / "index.faiss")[self.metric]
            write_json_atomic(folder / "memory.json", meta)
            if self._value_data is not None:
                from safetensors.torch import save_file

                save_file({"ids": torch.from_numpy(self._value_ids.copy()), "values": self._value_data.contiguous()},
                          str(folder / "values.safetensors"))

        return replace_owned_folder(directory, write, what="retrieval memory")

    @classmethod
    def load(cls, directory: str | Path, dim: Optional[int] = None, metric: Optional[str] = None,
             device: str = "auto") -> "RetrievalMemory":
        """Read a saved memory. ``dim`` / ``metric``, when given, must match what was saved (a
        memory built for other vectors gives wrong neighbours, not an error, so check here)."""
        faiss = _faiss()
        directory = Path(directory)
        meta_path = directory / "memory.json"
        if not meta_path.is_file() or not (directory / "index.faiss").is_file():
            raise MemoryFormatError(f"{directory}: not a saved memory (needs memory.json and index.faiss)")
        meta = read_json_object(meta_path, MemoryFormatError)
        for key in ("format", "dim", "metric", "index", "next_id", "hidden"):
            if key not in meta:
                raise MemoryFormatError(f"{meta_path}: missing field {key!r}")
        for key, hint in META_TYPES.items():
            if key in meta:
                try:
                    check(meta[key], hint, Where(key, str(meta_path)))
                except ConfigError as err:
                    raise MemoryFormatError(str(err)) from None
        if meta["format"] != FORMAT:
            raise MemoryFormatError(f"{meta_path}: format {meta['format']} is not supported (expected {FORMAT})")
        if dim is not None and meta["dim"] != dim:
            raise MemoryFormatError(f"{directory}: the saved memory has dimension {meta['dim']}, but dimension "
                                    f"{dim} was expected; rebuild the memory with keys of the new encoder")
        if metric is not None and meta["metric"] != metric:
            raise MemoryFormatError(f"{directory}: the saved memory uses metric {meta['metric']!r}, but "
                                    f"{metric!r} was expected")
        if meta["metric"] not in METRICS:
            raise MemoryFormatError(f"{meta_path}: metric {meta['metric']!r} must be one of {', '.join(METRICS)}")
        try:
            index = faiss.read_index(str(directory / "index.faiss"))
        except RuntimeError as err:  # faiss reports a truncated or foreign file as a RuntimeError
            raise MemoryFormatError(f"{directory / 'index.faiss'}: not a readable FAISS index "
                                    f"({str(err).strip().splitlines()[-1]})") from None
        if index.d != meta["dim"]:
            raise MemoryFormatError(f"{directory}: index.faiss has dimension {index.d} but memory.json says {meta['dim']}")
        expected = faiss.METRIC_L2 if meta["metric"] == "l2" else faiss.METRIC_INNER_PRODUCT
        if index.metric_type != expected:
            found = "l2" if index.metric_type == faiss.METRIC_L2 else "inner product"
            raise MemoryFormatError(f"{directory}: memory.json says metric {meta['metric']!r}, but index.faiss "
                                    f"ranks by {found}: its scores would be mislabelled")
        _check_metric(directory, meta, index, faiss)
        memory = cls.__new__(cls)
        memory.dim, memory.factory, memory.metric, memory.device = meta["dim"], meta["index"], meta["metric"], device
        if not isinstance(index, faiss.IndexIDMap2):  # read_index returns the concrete (owning) type
            raise MemoryFormatError(f"{directory}: index.faiss is not an id-mapped index")
        ids = faiss.vector_to_array(index.id_map).astype(np.int64)
        memory._wrap(index.index, ids, owner=index)
        memory._hidden = set(meta["hidden"])
        memory._ids = set(ids.tolist()) - memory._hidden
        memory.next_id = meta["next_id"]
        memory._value_ids, memory._value_data = np.empty(0, dtype=np.int64), None
        if meta.get("values"):
            stored = _read_values(directory / "values.safetensors")
            memory._value_ids, memory._value_data = stored["ids"].numpy().astype(np.int64), stored["values"]
            if len(memory._value_ids) != len(memory._ids):
                raise MemoryFormatError(f"{directory}: values.safetensors holds {len(memory._value_ids)} rows for "
                                        f"{len(memory._ids)} entries")
        if len(memory) != meta.get("count", len(memory)):
            raise MemoryFormatError(f"{directory}: memory.json counts {meta['count']} entries, index.faiss holds {len(memory)}")
        memory.search_params = {}
        try:
            memory.set_search_params(**meta.get("search_params", {}))
        except MemoryFormatError as err:
            raise MemoryFormatError(f"{meta_path}: search_params: {err}") from None
        return memory


def recall_at_k(found: torch.Tensor, exact: torch.Tensor) -> float:
    """Mean fraction of the exact top-k ids that an approximate search found ([Q, k] each)."""
    hits = sum(len(set(a) & set(b)) for a, b in zip(found.tolist(), exact.tolist()))
    return hits / max(1, exact.numel())


def default_ivf_lists(n: int) -> int:
    """A common rule of thumb for IVF: about 4·√n lists."""
    return max(1, int(4 * math.sqrt(n)))
