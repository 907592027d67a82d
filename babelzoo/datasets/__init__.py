"""Corpora, tokenizers, language sampling, loaders and downloads."""
