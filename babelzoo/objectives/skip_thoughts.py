"""Skip-thoughts: encode a sentence, generate its neighbours.

Kiros et al. 2015, "Skip-Thought Vectors". For every sentence s_i of a document that has both
neighbours, the encoder (the model) reads s_i into a vector h_i and two decoders generate the
previous sentence s_{i−1} and the next sentence s_{i+1} from it. The objective is

    Σ_t log P(w_{i+1}^t | w_{i+1}^{<t}, h_i) + Σ_t log P(w_{i−1}^t | w_{i−1}^{<t}, h_i)

summed over the words of each neighbour (its end-of-sentence token included); the loss is its
negative averaged over the batch's triples. P(w^t | w^{<t}, h_i) ∝ exp(v_{w^t} · h^t): the
vocabulary matrix V is the model's word embedding table (tied, shared by both decoders, as the
paper shares V), so each decoder is as wide as the embeddings.

The decoders are the paper's conditional GRU (§2): h_i biases the reset gate, the
update gate and the candidate at every step,

    r^t = σ(W_r x^{t−1} + U_r h^{t−1} + C_r h_i)
    z^t = σ(W_z x^{t−1} + U_z h^{t−1} + C_z h_i)
    h̄^t = tanh(W x^{t−1} + U (r^t ⊙ h^{t−1}) + C h_i)
    h^t = (1 − z^t) ⊙ h^{t−1} + z^t ⊙ h̄^t,     h^0 = 0

rather than the common variant that starts a plain GRU from h_i: the sentence vector then
reaches every word's prediction directly instead of through a state the decoder may overwrite,
and it is the formulation the paper's results come from. The decoder inputs x are the tied word
embeddings of the previous target words (x^0 = the ``[CLS]`` embedding); the targets end with
``[SEP]``.

h_i is the model's sentence vector (:meth:`~babelzoo.zoo.model.BabelModel.sentence_embedding`)
with ``final`` pooling unless the architecture fixes another: the top layer's forward state at
the last real token and, for a bidirectional RNN, its backward state at the first token, i.e.
the states each direction ends in on the unpadded sentence (the paper's bi-skip concatenates the
final states of a forward and a backward encoder). The encoder reads ``[CLS] s_i [SEP]``.

Examples are documents (sequences of sentences); a document's first and last sentences are
never encoded (each lacks a neighbour) but serve as targets of their neighbours, and a batch
without any sentence that has two neighbours is an error.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..datasets.specials import SpecialIds
from ..zoo.config import EncoderConfig
from ..zoo.model_config import ModelConfig
from .base import Loss, Objective, register_objective
from .batching import IGNORE, encoder_inputs, pad, sentence_batch, truncate, unwrap
from .examples import ExampleError, as_document, require_nonempty


def neighbour_triples(sizes: Sequence[int]) -> list[tuple[int, int]]:
    """(document, sentence) of every sentence with a previous and a next sentence in its own
    document, in order: sentences 1 … n−2 of each document of n sentences."""
    return [(d, k) for d, n in enumerate(sizes) for k in range(1, n - 1)]


class ConditionalGRU(nn.Module):
    """Kiros et al.'s decoder: a GRU whose gates and candidate also read a condition vector at
    every step (formula in the module docstring). ``forward(x [N, T, E], condition [N, D])``
    returns the states h^1 … h^T [N, T, H]. Initialised as the paper does: recurrent matrices
    orthogonal, the others uniform in [−0.1, 0.1], biases zero."""

    def __init__(self, input_size: int, hidden_size: int, condition_size: int):
        super().__init__()
        self.hidden_size = hidden_size
        self.input = nn.Linear(input_size, 3 * hidden_size)  # W_r, W_z, W (and their biases)
        self.condition = nn.Linear(condition_size, 3 * hidden_size, bias=False)  # C_r, C_z, C
        self.gates = nn.Linear(hidden_size, 2 * hidden_size, bias=False)  # U_r, U_z
        self.candidate = nn.Linear(hidden_size, hidden_size, bias=False)  # U
        for linear in (self.input, self.condition):
            nn.init.uniform_(linear.weight, -0.1, 0.1)
        nn.init.zeros_(self.input.bias)
        for block in self.gates.weight.data.chunk(2, 0):
            nn.init.orthogonal_(block)
        nn.init.orthogonal_(self.candidate.weight)

    def forward(self, x: torch.Tensor, condition: torch.Tensor) -> torch.Tensor:
        # The input and condition terms do not depend on h^{t−1}: computed for all steps at once.
        fixed = self.input(x) + self.condition(condition).unsqueeze(1)
        h = x.new_zeros(x.shape[0], self.hidden_size)
        states = []
        for t in range(x.shape[1]):
            a_r, a_z, a_h = fixed[:, t].chunk(3, dim=-1)
            u_r, u_z = self.gates(h).chunk(2, dim=-1)
            r, z = torch.sigmoid(a_r + u_r), torch.sigmoid(a_z + u_z)
            candidate = torch.tanh(a_h + self.candidate(r * h))
            h = (1 - z) * h + z * candidate
            states.append(h)
        return torch.stack(states, dim=1)


@register_objective
class SkipThoughts(Objective):
    """Skip-thoughts over documents. Owns ``decoders`` (``next`` and ``previous``, each a
    :class:`ConditionalGRU` as wide as the word embeddings); ``pooling`` chooses how h_i is read
    (None: ``final``, or the pooling the model's architecture fixes)."""

    name = "skip_thoughts"
    consumes = "document"
    SIDES = (("next", 1), ("previous", -1))

    def __init__(self, specials: SpecialIds, config: EncoderConfig | ModelConfig, *, max_length: int = 64,
                 pooling: Optional[str] = None, use_language_ids: bool = True):
        super().__init__()
        text = config.text if isinstance(config, ModelConfig) else config
        self.specials = specials
        self.max_length = max_length
        self.pooling = pooling
        self.use_language_ids = use_language_ids
        width = text.embedding_dim
        self.decoders = nn.ModuleDict({side: ConditionalGRU(width, width, text.hidden_size) for side, _ in self.SIDES})

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        require_nonempty(examples, self.name)
        documents = [as_document(x, i) for i, x in enumerate(examples)]
        triples = neighbour_triples([len(d) for d in documents])
        if not triples:
            raise ExampleError(f"{self.name}: no document of this batch has a sentence with both neighbours "
                               f"(documents need at least three sentences; sizes: {[len(d) for d in documents]})")
        s = self.specials
        batch = sentence_batch([documents[d][k] for d, k in triples], s, self.max_length, self.name,
                               self.use_language_ids)
        for side, shift in self.SIDES:
            inputs, labels = [], []
            for d, k in triples:
                ids, cut = truncate(documents[d][k + shift].ids, self.max_length - 1)
                inputs.append([s.cls, *ids])
                labels.append([*ids, s.sep])
                batch["truncated"] = batch["truncated"] + cut
            batch[f"{side}_inputs"] = pad(inputs, s.pad)
            batch[f"{side}_labels"] = pad(labels, IGNORE)
        return batch

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        core = unwrap(model)
        out = model(**encoder_inputs(model, batch, self.use_language_ids))
        h = core.sentence_embedding(out.last_hidden, batch["attention_mask"], self.pooling, default="final")
        table = core.word_embeddings.weight
        total, metrics, correct, counted = 0.0, {}, 0, 0
        for side, _ in self.SIDES:
            labels = batch[f"{side}_labels"]
            states = self.decoders[side](F.embedding(batch[f"{side}_inputs"], table), h)
            real = labels.ne(IGNORE)
            logits = F.linear(states[real], table)  # ∝ exp(v_w · h^t), V tied to the word embeddings
            targets = labels[real]
            nll = F.cross_entropy(logits.float(), targets, reduction="sum")  # −Σ_t log P(w^t | w^{<t}, h_i)
            total = total + nll
            with torch.no_grad():
                metrics[f"{side}_loss"] = nll.detach() / targets.numel()
                correct = correct + (logits.argmax(-1) == targets).sum()
                counted += targets.numel()
        loss = total / h.shape[0]
        metrics.update(loss=loss.detach(), accuracy=correct / counted, truncated=batch["truncated"])
        return Loss(loss, metrics, batch["attention_mask"].sum() + counted)
