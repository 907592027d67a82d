"""The encoder–decoder family: BART, mBART and T5 as switches of one Transformer
encoder–decoder.

``config.py``: its config and zoo entries (no torch); ``model.py``: its modules and build
function."""
