"""Knowledge bases, entity linking, KG embeddings, knowledge fusion and retrieval memory.

    from babelzoo.knowledge import load_kb, EntityLinker, attach_knowledge
    kb = load_kb("cldr")                     # or a folder/file, "codex-s", "wn18rr", an installed plug-in
    linker = EntityLinker.from_kb(kb, ["de"])
    linker.link_text("Deutschland zahlt mit Euro.", lang="de")

Names load on first use, so importing this package loads neither networkx, babel nor faiss.
"""

from __future__ import annotations

from .._lazy import lazy_getattr

_API = {
    "KnowledgeBase": "base", "KBError": "base", "Triple": "base", "KNOWLEDGE_BASES": "base",
    "register_kb": "base", "load_kb": "base", "list_kbs": "base",
    "GraphKB": "graph", "read_kb": "kb_layouts", "read_triples": "graph_files", "read_names": "graph_files",
    "read_openke": "openke",
    "load_cldr": "cldr", "build_cldr_kb": "cldr",
    "load_codex": "codex", "read_codex": "codex",
    "read_text_kg": "text_kg", "load_wn18rr": "text_kg", "download_wn18rr": "text_kg",
    "EntityLinker": "linker", "Mention": "linker", "normalize": "linker",
    "KGEModel": "kge", "TransE": "kge", "DistMult": "kge", "ComplEx": "kge", "RotatE": "kge",
    "KGE_MODELS": "kge", "create_kge": "kge", "LinkPredictionData": "kge", "save_kge": "kge", "load_kge": "kge",
    "KGETrainConfig": "link_prediction", "train_kge": "link_prediction", "evaluate": "link_prediction",
    "RetrievalMemory": "memory", "MemoryFormatError": "memory", "recall_at_k": "memory",
    "attach_knowledge": "attach", "KnowledgeFusion": "attach", "ErnieFeedForward": "attach",
    "DEAObjective": "dea", "DEAHead": "dea", "corrupt_entities": "dea",
    "KBertInjector": "kbert", "flatten_tree": "kbert", "SentenceTree": "kbert", "KBertMLM": "kbert_mlm",
    "entity_mask": "entity_masking",
    "KNNAttention": "knn", "KNNLM": "knn",
}

__all__ = list(_API)


__getattr__ = lazy_getattr(__name__, _API)


def __dir__() -> list[str]:
    return sorted(__all__)
