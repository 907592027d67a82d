"""The XLNet family (Yang et al. 2019): two-stream relative attention.

``config.py``: its config and zoo entries (no torch); ``model.py``: its modules and build
function."""
