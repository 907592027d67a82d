"""The ModernBERT family (Warner et al. 2024).

``config.py``: its config and zoo entries (no torch); ``model.py``: its modules and build
function."""
