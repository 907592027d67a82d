"""Making pre-trained models cheaper: vocabulary trimming (keep the pieces a corpus uses),
quantization (int8 dynamic for CPU inference, 8/4-bit weight-only), head, feed-forward and layer
pruning; and reshaping a vocabulary for the languages it serves poorly: measuring how finely it
cuts their words (fragmentation) and giving them pieces of their own (extension).

Each transform returns a normal model that saves, loads and encodes through the usual API::

    from babelzoo.compression import quantize, trim_vocabulary
    small = trim_vocabulary(model, {"de": german_texts, "fr": french_texts})
    fast = quantize(small, "int8")
"""

from .extension import NewPiece, add_pieces, extend_vocabulary, learn_pieces
from .fragmentation import Fragmentation, fragmentation
from .pruning import head_importance, lowest_heads, neuron_magnitudes, prune_ffn, prune_heads, prune_layers
from .quantization import quantize
from .vocabulary import select_vocabulary, trim_vocabulary, used_pieces

__all__ = [
    "Fragmentation", "NewPiece", "add_pieces", "extend_vocabulary", "fragmentation", "head_importance",
    "learn_pieces", "lowest_heads", "neuron_magnitudes", "prune_ffn", "prune_heads", "prune_layers", "quantize",
    "select_vocabulary", "trim_vocabulary", "used_pieces",
]
