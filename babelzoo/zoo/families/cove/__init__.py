"""CoVe's family (McCann et al. 2017): an attentional LSTM encoder–decoder for translation whose
encoder states are contextual word vectors.

``config.py``: its config and zoo entries (no torch); ``model.py``: its modules and build
function."""
