"""Pre-training objectives, one file each, registered by name.

==========================  ===============================================================
name                        objective
==========================  ===============================================================
``mlm`` / ``mmlm``          masked LM (BERT), multilingual masked LM (mBERT, XLM)
``tlm``                     translation LM (XLM)
``clwr``                    cross-lingual word recovery (Unicoder)
``clpc``                    cross-lingual paraphrase classification (Unicoder)
``clmlm``                   code-switched masked LM (Unicoder)
``clm``                     causal LM (GPT, XLM)
``nsp`` / ``sop``           next-sentence (BERT) / sentence-order (ALBERT) prediction
``rtd``                     replaced-token detection (ELECTRA)
``sbo``                     span masking with the span-boundary objective (SpanBERT)
``segment_mlm``             masked LM over a document's consecutive segments with memory (Transformer-XL)
``segment_clm``             causal LM over a document's consecutive segments with memory (Transformer-XL)
``xlco``                    cross-lingual contrast (InfoXLM)
``translation_ranking``     additive-margin translation ranking (LaBSE)
``dea`` / ``entity_mlm``    entity alignment (ERNIE) / entity-level masked LM (ERNIE 1.0), from :mod:`babelzoo.knowledge`
``kbert_mlm``               masked LM over K-BERT sentence trees (visible matrix, soft positions), from :mod:`babelzoo.knowledge`
``sequence_classification`` fine-tuning: cross-entropy of the model's sequence head
``token_classification``    fine-tuning: cross-entropy of the model's token head on first sub-words
==========================  ===============================================================

``build_objective(name, specials, model.config, **options)`` instantiates one;
:class:`Mixture` combines several.
"""

from .base import OBJECTIVES, Loss, Objective, register_objective
from .classification import Labelled, SequenceClassification, Tagged, TokenClassification, align_first_subword
from .clm import CLM
from .clmlm import CLMLM
from .clpc import CLPC
from .clwr import CLWR
from .examples import ExampleError, Pair, Sentence
from .gather import gather_with_grad
from .itc import ITC, contrastive_loss
from .itm import ITM, sample_hard_negatives
from .masking import Masker, MaskingConfig, span_length_distribution, word_starts_from_pieces
from .mixture import Mixture, build_objective
from .mlm import MLM, MMLM
from .mlm_conditioned import ConditionedMLM
from .negatives import MINERS, HardNegatives, NegativeMiner, RandomNegatives
from .rtd import RTD
from .sbo import SpanBoundary, span_boundaries
from .segment_clm import SegmentCLM
from .segment_mlm import SegmentMLM
from .sop import NSP, SOP
from .tlm import TLM
from .translation_ranking import TranslationRanking, additive_margin_loss
from .xlco import XLCo, info_nce

__all__ = [
    "ITC", "ITM", "ConditionedMLM", "contrastive_loss", "sample_hard_negatives",
    "CLM", "CLMLM", "CLPC", "CLWR", "ExampleError", "HardNegatives", "Loss", "MINERS", "MLM", "MMLM", "Masker",
    "MaskingConfig", "Mixture", "NSP", "NegativeMiner", "OBJECTIVES", "Objective", "Pair", "RTD",
    "RandomNegatives", "SOP", "Sentence", "TLM", "TranslationRanking", "XLCo", "additive_margin_loss",
    "build_objective", "gather_with_grad", "info_nce", "register_objective", "span_length_distribution",
    "word_starts_from_pieces", "Labelled", "SequenceClassification", "Tagged", "TokenClassification",
    "align_first_subword", "SpanBoundary", "span_boundaries", "SegmentCLM", "SegmentMLM",
]
