"""Making pre-trained models cheaper: vocabulary trimming (keep the pieces a corpus uses) and
quantization (int8 dynamic for CPU inference, 8/4-bit weight-only).

Each function returns a normal model that saves, loads and encodes through the usual API::

    from babelzoo.compression import quantize, trim_vocabulary
    small = trim_vocabulary(model, {"de": german_texts, "fr": french_texts})
    fast = quantize(small, "int8")
"""

from .quantization import quantize
from .vocabulary import select_vocabulary, trim_vocabulary, used_pieces

__all__ = ["quantize", "select_vocabulary", "trim_vocabulary", "used_pieces"]
