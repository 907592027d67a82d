"""Negative miners for cross-lingual paraphrase classification (CLPC).

A miner picks, for every source sentence X_i of a batch, target sentences Y_j that are *not*
its translation. ``forbidden[i, j]`` is True where Y_j must never be used for X_i: j = i, and
every j whose source or target text equals that of pair i (a duplicated pair is a true
translation too). A miner that cannot find enough allowed candidates raises an error rather
than return a translation as a negative.

* :class:`RandomNegatives` — uniformly among the allowed targets of the batch (needs no model).
* :class:`HardNegatives` — the nearest allowed targets by cosine similarity of the current
  model's sentence embeddings, searched with FAISS; Unicoder (Huang et al. 2019) makes
  CLPC harder with such similar-but-wrong candidates.
"""

from __future__ import annotations

import abc
from typing import ClassVar, Optional

import torch

from ..errors import InputError
from ..registry import Registry
from .examples import ExampleError


def _check_enough(forbidden: torch.Tensor, count: int) -> None:
    allowed = (~forbidden).sum(1)
    if bool((allowed < count).any()):
        row = int((allowed < count).nonzero()[0])
        raise ExampleError(f"example {row} has only {int(allowed[row])} non-translation target(s) in its batch "
                           f"but {count} negative(s) were asked for; use larger batches with distinct pairs")


class NegativeMiner(abc.ABC):
    """``mine(forbidden, count, queries, keys) -> [B, count]`` indices of negative targets."""

    name: ClassVar[str] = ""
    needs_embeddings: ClassVar[bool] = False
    # how sentence vectors are pooled when the miner needs embeddings (None: mean, or the model's own)
    pooling: Optional[str] = None

    @abc.abstractmethod
    def mine(self, forbidden: torch.Tensor, count: int, queries: Optional[torch.Tensor] = None,
             keys: Optional[torch.Tensor] = None, generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """Pick ``count`` distinct allowed targets for each row of ``forbidden`` [B, B]."""


MINERS: Registry[type[NegativeMiner]] = Registry("negative miner")


@MINERS.register(name="random")
class RandomNegatives(NegativeMiner):
    """Uniformly random allowed targets from the same batch."""

    name = "random"

    def mine(self, forbidden, count, queries=None, keys=None, generator=None):
        _check_enough(forbidden, count)
        scores = torch.rand(forbidden.shape, generator=generator).to(forbidden.device).masked_fill(forbidden, 2.0)
        return scores.topk(count, dim=1, largest=False).indices


@MINERS.register(name="hard")
class HardNegatives(NegativeMiner):
    """The ``count`` allowed targets most similar (cosine) to each source, by FAISS exact
    inner-product search over L2-normalised embeddings (``faiss.IndexFlatIP``) of sentence vectors
    pooled by ``pooling`` (None: mean, or the pooling the model's architecture fixes)."""

    name = "hard"
    needs_embeddings = True

    def __init__(self, pooling: Optional[str] = None):
        self.pooling = pooling

    def mine(self, forbidden, count, queries=None, keys=None, generator=None):
        from .._lazy import faiss as load_faiss  # heavy optional import, only when hard mining is used

        faiss = load_faiss()

        if queries is None or keys is None:
            raise InputError("HardNegatives.mine needs the source (queries) and target (keys) embeddings")
        _check_enough(forbidden, count)
        q = torch.nn.functional.normalize(queries.detach().float(), dim=-1).cpu().contiguous().numpy()
        k = torch.nn.functional.normalize(keys.detach().float(), dim=-1).cpu().contiguous().numpy()
        index = faiss.IndexFlatIP(k.shape[1])
        index.add(k)
        # Enough neighbours that, after dropping every forbidden one, `count` remain.
        depth = min(k.shape[0], count + int(forbidden.sum(1).max()))
        _, neighbours = index.search(q, depth)
        allowed = ~forbidden.cpu()
        picks = []
        for row, found in enumerate(neighbours.tolist()):
            chosen = [j for j in found if j >= 0 and bool(allowed[row, j])][:count]
            picks.append(chosen)
        return torch.tensor(picks, dtype=torch.long, device=forbidden.device)


def build_miner(miner: "str | NegativeMiner") -> NegativeMiner:
    """A miner instance from a name (``"random"``, ``"hard"``) or an instance."""
    return MINERS.get(miner)() if isinstance(miner, str) else miner
