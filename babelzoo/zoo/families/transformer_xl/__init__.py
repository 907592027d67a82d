"""The Transformer-XL family (Dai et al. 2019): segment recurrence with a memory.

``config.py``: its config and zoo entries (no torch); ``model.py``: its modules and build
function."""
