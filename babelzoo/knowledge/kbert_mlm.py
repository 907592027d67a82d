"""``kbert_mlm``: masked LM over K-BERT sentence trees (Liu et al., "K-BERT: Enabling Language
Representation with Knowledge Graph", AAAI 2020).

Each example is a :class:`~babelzoo.knowledge.kbert.SentenceTree` (a :class:`KBertInjector`
hangs knowledge-base triples after the sentence's mentions), or ``(tree, lang)``. The encoder
reads the whole tree through K-BERT's visible matrix and soft positions; masks fall on the
sentence's own tokens only, so the loss asks the model to predict the sentence with the injected
facts in view, and a branch can only help through the mention it hangs from (the visible
matrix hides it from the rest of the sentence)::

    injector = KBertInjector(kb, tokenizer.encode, lang="en", cls_id=specials.cls, sep_id=specials.sep)
    objective = KBertMLM(specials)
    loss = objective(model, objective.prepare([injector.tree(words) for words in sentences]))
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import nn

from ..objectives.base import Loss, register_objective
from ..objectives.batching import check_vocab, encoder_inputs, language_index, languages_known
from ..objectives.examples import ExampleError, require_nonempty
from ..objectives.mlm import MaskingObjective, token_prediction_loss
from .kbert import SentenceTree, collate_trees


def _as_tree(example: Any, index: int) -> tuple[SentenceTree, Any]:
    tree, lang = (example if isinstance(example, tuple) and len(example) == 2 else (example, None))
    if not isinstance(tree, SentenceTree):
        raise ExampleError(f"example {index}: expected a SentenceTree (KBertInjector.tree) or (tree, lang), "
                           f"got {type(tree).__name__}")
    return tree, lang


@register_objective
class KBertMLM(MaskingObjective):
    """Masked LM on the trunk of K-BERT sentence trees (see the module docstring). Trees longer
    than ``max_length`` are refused: :class:`KBertInjector` cuts them to its own limit."""

    name = "kbert_mlm"
    consumes = "sentence_tree"

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        require_nonempty(examples, self.name)
        trees, langs = zip(*(_as_tree(x, i) for i, x in enumerate(examples)))
        for i, tree in enumerate(trees):
            if len(tree.input_ids) > self.max_length:
                raise ExampleError(f"example {i}: a tree of {len(tree.input_ids)} tokens is longer than "
                                   f"max_length={self.max_length}")
        batch = collate_trees(trees, self.specials.pad)
        check_vocab(batch["input_ids"], self.specials, "K-BERT tree")
        trunk = batch["is_branch"].logical_not() & batch["attention_mask"].bool()
        masked = self.masker(batch["input_ids"], candidates=trunk)
        batch.update(input_ids=masked.input_ids, labels=masked.labels)
        if self.use_language_ids and languages_known(list(langs), self.name):
            lang = torch.tensor([language_index(self.specials, x, f"example {i}") for i, x in enumerate(langs)])
            batch["language_ids"] = lang[:, None].expand_as(batch["input_ids"]) * batch["attention_mask"]
        return batch

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        inputs = encoder_inputs(model, batch, self.use_language_ids)
        out = model(**inputs, visible=batch["visible"])
        loss, metrics = token_prediction_loss(model, out.last_hidden, batch["labels"])
        metrics["knowledge_tokens_per_row"] = batch["is_branch"].sum() / batch["is_branch"].shape[0]
        return Loss(loss, metrics, batch["attention_mask"].sum())
