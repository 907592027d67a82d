"""MTEB's protocol in babelzoo: bitext mining scored as MTEB scores it, Tatoeba under that
protocol (the leaderboard task ``tatoeba_mteb`` uses it), and a babelzoo model as the encoder the
``mteb`` package expects (:class:`MTEBEncoder`).

MTEB (Muennighoff et al. 2023) reports Tatoeba as bitext mining: every non-English sentence
looks up its nearest English sentence by cosine (top 1), and the predictions are scored against
the gold indices with scikit-learn's support-weighted precision, recall and F1 (F1 is the main
score) and accuracy. Its reference implementation gives a model its prompts by task name, then
task type, then prompt type (query or document); bitext mining asks for no prompt type, so a
model whose prompts are only ``query``/``document`` (multilingual-e5: ``"query: "``,
``"passage: "``) encodes Tatoeba with no prefix at all. :data:`E5_PROMPTS` are e5's, as MTEB's
model registry holds them.

Using a babelzoo model in ``mteb`` itself::

    import mteb
    from babelzoo.evaluation.mteb_protocol import E5_PROMPTS, MTEBEncoder

    model = babelzoo.from_pretrained("runs/adapt_e5_small/model")
    tasks = mteb.get_tasks(tasks=["Tatoeba"], languages=["bre"])
    results = mteb.evaluate(MTEBEncoder(model, prompts=E5_PROMPTS), tasks)
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np
import torch

from ..errors import InputError

# multilingual-e5's prompts, keyed as mteb keys them (its model registry, e5_models.py)
E5_PROMPTS = {"query": "query: ", "document": "passage: "}
QUERY_CHUNK = 100  # queries scored at a time (mteb's chunk; the top-1 neighbour does not depend on it)


def cosine(a, b) -> torch.Tensor:
    """Cosine similarity [len(a), len(b)] of two sets of vectors (arrays or tensors, [D] or [N, D])."""
    a, b = (torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x).float() for x in (a, b))
    a, b = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
    return torch.nn.functional.normalize(a, dim=1) @ torch.nn.functional.normalize(b, dim=1).T


def nearest(queries, corpus) -> np.ndarray:
    """Index of each query's most similar corpus vector by cosine."""
    queries = torch.as_tensor(np.asarray(queries)).float()
    out = [torch.topk(cosine(queries[i:i + QUERY_CHUNK], corpus), 1, dim=1).indices[:, 0]
           for i in range(0, len(queries), QUERY_CHUNK)]
    return torch.cat(out).numpy() if out else np.zeros(0, dtype=np.int64)


def bitext_mining_metrics(predictions: Sequence[int], gold: Sequence[int]) -> dict[str, float]:
    """MTEB's bitext-mining scores of predicted corpus indices against gold ones: accuracy, and
    precision, recall and F1 per corpus index averaged with each index weighted by how often it
    is gold (scikit-learn's ``average="weighted"``, ``zero_division=0``). With one gold query per
    index, recall is accuracy; precision and F1 are lower when several queries pick one index."""
    pred, true = np.asarray(predictions, dtype=np.int64), np.asarray(gold, dtype=np.int64)
    if pred.shape != true.shape or pred.ndim != 1 or not len(true):
        raise InputError(f"predictions ({pred.shape}) and gold ({true.shape}) must be two equally long, non-empty "
                         "lists of indices")
    labels, index = np.unique(np.concatenate([true, pred]), return_inverse=True)
    t, p = index[:len(true)], index[len(true):]
    support = np.bincount(t, minlength=len(labels)).astype(np.float64)
    predicted = np.bincount(p, minlength=len(labels)).astype(np.float64)
    hits = np.bincount(t[t == p], minlength=len(labels)).astype(np.float64)
    precision = np.divide(hits, predicted, out=np.zeros_like(hits), where=predicted > 0)
    recall = np.divide(hits, support, out=np.zeros_like(hits), where=support > 0)
    both = precision + recall
    f1 = np.divide(2 * precision * recall, both, out=np.zeros_like(hits), where=both > 0)
    weights = support / support.sum()
    return {"precision": float(weights @ precision), "recall": float(weights @ recall), "f1": float(weights @ f1),
            "accuracy": float(np.mean(t == p))}


def bitext_mining(queries, corpus, gold: Optional[Sequence[int]] = None) -> dict[str, float]:
    """:func:`bitext_mining_metrics` of each query's nearest corpus vector (gold: query i's
    translation is corpus i)."""
    return bitext_mining_metrics(nearest(queries, corpus), range(len(queries)) if gold is None else gold)


class MTEBEncoder:
    """A babelzoo model (anything with ``encode`` and ``tokenizer``, e.g. from
    :func:`babelzoo.from_pretrained` or :func:`babelzoo.create_model`) as ``mteb``'s encoder:
    ``encode`` takes mteb's batches and task metadata and picks the prompt from ``prompts`` by
    mteb's own rule (task name and prompt type, task name, task type and prompt type, task type,
    prompt type); ``similarity`` is the cosine. Each distinct text is embedded once.

    ``prompts``: mteb's keys (``"query"``, ``"document"``, a task type such as
    ``"BitextMining"``, a task name) to prefixes; ``None`` applies none. ``pooling``,
    ``max_length`` and ``batch_size`` go to :meth:`model.encode <babelzoo.zoo.sentences.ReadsText.encode>`."""

    def __init__(self, model: Any, *, prompts: Optional[Mapping[str, str]] = None, name: Optional[str] = None,
                 batch_size: int = 32, pooling: Optional[str] = None, max_length: Optional[int] = None):
        self.model = model
        self.prompts = dict(prompts or {})
        self.name = name or f"babelzoo/{getattr(getattr(model, 'config', None), 'architecture', 'model')}"
        self.batch_size, self.pooling, self.max_length = batch_size, pooling, max_length

    def prompt(self, task_metadata: Any, prompt_type: Any = None) -> str:
        """The prefix mteb's rule picks for this task and prompt type ("" when none applies)."""
        kind = getattr(prompt_type, "value", prompt_type)
        task, task_type = task_metadata.name, task_metadata.type
        for key in ([f"{task}-{kind}"] if kind else []) + [task] + ([f"{task_type}-{kind}"] if kind else []) + \
                [task_type] + ([kind] if kind else []):
            if key in self.prompts:
                return self.prompts[key]
        return ""

    def encode(self, inputs: Iterable[Mapping[str, Any]], *, task_metadata: Any, hf_split: str = "",
               hf_subset: str = "", prompt_type: Any = None, **kwargs: Any) -> np.ndarray:
        texts = [text for batch in inputs for text in batch["text"]]
        distinct = list(dict.fromkeys(texts))
        vectors = self.model.encode(distinct, prompt=self.prompt(task_metadata, prompt_type) or None,
                                    batch_size=self.batch_size, pooling=self.pooling, max_length=self.max_length)
        row = {text: i for i, text in enumerate(distinct)}
        return vectors[[row[text] for text in texts]] if texts else vectors.reshape(0, -1)

    def similarity(self, embeddings1, embeddings2) -> torch.Tensor:
        return cosine(embeddings1, embeddings2)

    def similarity_pairwise(self, embeddings1, embeddings2) -> torch.Tensor:
        a, b = (torch.nn.functional.normalize(torch.as_tensor(np.asarray(x)).float(), dim=-1)
                for x in (embeddings1, embeddings2))
        return (a * b).sum(-1)

    @property
    def mteb_model_meta(self):
        """What mteb records about the model (built when mteb asks; mteb must be installed)."""
        from mteb.models import ModelMeta

        size = sum(p.numel() for p in self.model.parameters()) if hasattr(self.model, "parameters") else None
        dim = getattr(getattr(getattr(self.model, "config", None), "text", None), "hidden_size", None)
        return ModelMeta.create_empty(overwrites={"name": self.name, "revision": "local", "n_parameters": size,
                                                  "embed_dim": dim, "similarity_fn_name": "cosine",
                                                  "framework": ["PyTorch"]})
