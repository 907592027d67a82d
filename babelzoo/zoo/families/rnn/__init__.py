"""The RNN family: bidirectional LSTM and GRU encoders over token embeddings.

``config.py``: its config and zoo entries (no torch); ``model.py``: its modules and build
function."""
