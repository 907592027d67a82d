"""torch.hub entry points: one per registered babelzoo model.

    model = torch.hub.load("path/to/babelzoo", "xlmr_tiny", source="local")
"""

from babelzoo.hub import entrypoints as _entrypoints

dependencies = ["torch", "safetensors", "sentencepiece"]

globals().update(_entrypoints())
