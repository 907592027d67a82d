"""Knowledge bases, entity linking, KG embeddings, knowledge fusion and retrieval memory."""
