"""The Transformer family: BERT and its relatives (RoBERTa, XLM-R, mBERT, XLM, ELECTRA, e5) as
switches of one encoder.

``config.py``: its config and zoo entries (no torch); ``model.py``: its modules and build
function."""
