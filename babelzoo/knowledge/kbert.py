"""K-BERT knowledge injection (Liu et al., "K-BERT: Enabling Language Representation with
Knowledge Graph", AAAI 2020).

Triples (entity, relation, object) about each linked mention are hung after the mention as
branches of a *sentence tree*, which is flattened into one token sequence. Two devices keep the
injected knowledge from changing the sentence's meaning:

- **soft positions**: the sentence (trunk) keeps the positions it would have without branches;
  a branch continues from the end of its mention (Tim₁ Cook₂ CEO₃ Apple₄ is₃ visiting₄ ...);
- **visible matrix** M (eq. 7 of the paper, as in the reference code): a trunk token sees every
  trunk token and the branches of the mention it belongs to; a branch token sees its own branch
  and its mention. Branches of the same mention do not see each other.

The encoder takes these as ``model(input_ids, visible=visible, position_ids=position_ids)``.
``knowledge=False`` is the no-knowledge ablation: the same pipeline with no branches (plain
positions, full visibility), so any difference is the knowledge's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import torch

from .base import KBError


@dataclass
class SentenceTree:
    """One flattened tree: token ids, soft positions, visibility [n, n] and which tokens are
    injected knowledge."""

    input_ids: list[int]
    position_ids: list[int]
    visible: torch.Tensor
    is_branch: list[bool]


def flatten_tree(trunk: Sequence[Sequence[int]], branches: dict[tuple[int, int], Sequence[Sequence[int]]],
                 max_length: Optional[int] = None) -> SentenceTree:
    """Flatten a sentence tree. ``trunk``: token ids of each word (or special token) of the
    sentence; ``branches``: (first word, end word) of a mention → the token ids of each branch
    hung after it. Truncates to ``max_length`` tokens."""
    ends = {}
    for (start, end), items in branches.items():
        if not 0 <= start < end <= len(trunk):
            raise KBError(f"mention span ({start}, {end}) is outside the sentence of {len(trunk)} words")
        ends.setdefault(end, []).append((start, end, items))
    ids: list[int] = []
    soft: list[int] = []
    is_branch: list[bool] = []
    word_slots: list[list[int]] = []
    groups: list[tuple[tuple[int, int], list[list[int]]]] = []  # (mention words, branch slots)
    position = 0
    for w, tokens in enumerate(trunk):
        slots = []
        for token in tokens:
            slots.append(len(ids))
            ids.append(int(token))
            soft.append(position)
            is_branch.append(False)
            position += 1
        word_slots.append(slots)
        for start, end, items in ends.get(w + 1, []):
            branch_slots = []
            for branch in items:
                slots_b = []
                for offset, token in enumerate(branch):
                    slots_b.append(len(ids))
                    ids.append(int(token))
                    soft.append(position + offset)  # continues from the mention's last position
                    is_branch.append(True)
                branch_slots.append(slots_b)
            groups.append(((start, end), branch_slots))
    n = len(ids)
    visible = torch.zeros(n, n, dtype=torch.bool)
    trunk_slots = torch.tensor([i for slots in word_slots for i in slots], dtype=torch.long)
    visible[trunk_slots[:, None], trunk_slots[None, :]] = True
    for (start, end), branch_slots in groups:
        mention = torch.tensor([i for slots in word_slots[start:end] for i in slots], dtype=torch.long)
        for slots_b in branch_slots:
            branch = torch.tensor(slots_b, dtype=torch.long)
            visible[mention[:, None], branch[None, :]] = True
            visible[branch[:, None], branch[None, :]] = True
            visible[branch[:, None], mention[None, :]] = True
    if max_length is not None and n > max_length:
        ids, soft, is_branch, visible = ids[:max_length], soft[:max_length], is_branch[:max_length], \
            visible[:max_length, :max_length]
    return SentenceTree(ids, soft, visible, is_branch)


class KBertInjector:
    """Build K-BERT inputs for a batch of word-tokenised sentences.

    ``tokenize(text) -> list[int]`` maps a word or a branch text to token ids (e.g. a
    sentencepiece tokenizer's ``encode``). Mentions come from ``linker`` (an
    :class:`~babelzoo.knowledge.linker.EntityLinker`, word offsets) in language ``lang``; each
    gets up to ``max_branches`` triples (entity, relation, object), in the knowledge base's order,
    as the branch text "relation label + object name" in ``lang`` (the knowledge base's
    ``entity_name`` where it has one, else the object's label).
    """

    def __init__(self, kb, tokenize: Callable[[str], Sequence[int]], linker=None, lang: str = "en",
                 max_branches: int = 2, max_length: int = 128, knowledge: bool = True,
                 cls_id: Optional[int] = None, sep_id: Optional[int] = None, pad_id: int = 0):
        if linker is None and knowledge:
            from .linker import EntityLinker

            linker = EntityLinker.from_kb(kb, [lang])
        self.kb, self.tokenize, self.linker, self.lang = kb, tokenize, linker, lang
        self.max_branches, self.max_length, self.knowledge = max_branches, max_length, knowledge
        self.cls_id, self.sep_id, self.pad_id = cls_id, sep_id, pad_id

    def branch_texts(self, entity: str) -> list[str]:
        texts = []
        for _, relation, tail in self.kb.triples(head=entity)[: self.max_branches]:
            texts.append(f"{_relation_name(self.kb, relation, self.lang)} {_entity_name(self.kb, tail, self.lang)}")
        return texts

    def tree(self, words: Sequence[str]) -> SentenceTree:
        trunk = [list(self.tokenize(w)) for w in words]
        offset = 0
        if self.cls_id is not None:
            trunk.insert(0, [self.cls_id])
            offset = 1
        if self.sep_id is not None:
            trunk.append([self.sep_id])
        branches: dict[tuple[int, int], list[list[int]]] = {}
        if self.knowledge:
            for mention in self.linker.link_tokens(words, self.lang):
                texts = self.branch_texts(mention.entity)
                if texts:
                    branches[(mention.start + offset, mention.end + offset)] = [list(self.tokenize(t)) for t in texts]
        return flatten_tree(trunk, branches, self.max_length)

    def __call__(self, batch: Sequence[Sequence[str]]) -> dict[str, torch.Tensor]:
        """``input_ids``, ``position_ids`` (soft), ``visible`` [B, L, L], ``attention_mask`` and
        ``is_branch`` for a batch, padded to its longest tree."""
        trees = [self.tree(words) for words in batch]
        return collate_trees(trees, self.pad_id)


def collate_trees(trees: Sequence[SentenceTree], pad_id: int = 0) -> dict[str, torch.Tensor]:
    length = max(len(t.input_ids) for t in trees)
    b = len(trees)
    out = {"input_ids": torch.full((b, length), pad_id, dtype=torch.long),
           "position_ids": torch.zeros((b, length), dtype=torch.long),
           "visible": torch.zeros((b, length, length), dtype=torch.bool),
           "attention_mask": torch.zeros((b, length), dtype=torch.long),
           "is_branch": torch.zeros((b, length), dtype=torch.bool)}
    for i, tree in enumerate(trees):
        n = len(tree.input_ids)
        out["input_ids"][i, :n] = torch.tensor(tree.input_ids, dtype=torch.long)
        out["position_ids"][i, :n] = torch.tensor(tree.position_ids, dtype=torch.long)
        out["visible"][i, :n, :n] = tree.visible
        out["attention_mask"][i, :n] = 1
        out["is_branch"][i, :n] = torch.tensor(tree.is_branch, dtype=torch.bool)
    return out


def _entity_name(kb, entity: str, lang: str) -> str:
    if hasattr(kb, "entity_name"):
        return kb.entity_name(entity, lang)
    if hasattr(kb, "label"):
        return kb.label(entity, lang)
    names = kb.labels(entity, lang) or kb.labels(entity)
    return names[0] if names else entity


def _relation_name(kb, relation: str, lang: str) -> str:
    if hasattr(kb, "relation_label"):
        return kb.relation_label(relation, lang)
    return relation.replace("_", " ")
