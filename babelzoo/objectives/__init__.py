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
``plm``                     permutation LM with two-stream attention (XLNet)
``unilm``                   cloze under bidirectional, left-to-right, right-to-left and seq2seq masks (UniLM)
``glm``                     autoregressive blank infilling with 2-D positions (GLM)
``segment_mlm``             masked LM over a document's consecutive segments with memory (Transformer-XL)
``segment_clm``             causal LM over a document's consecutive segments with memory (Transformer-XL)
``xlco``                    cross-lingual contrast (InfoXLM)
``translation_ranking``     additive-margin translation ranking (LaBSE)
``skip_thoughts``           generate the previous and next sentence from a sentence's vector (Kiros et al.)
``quick_thoughts``          pick a sentence's neighbours among the batch's sentences (Logeswaran & Lee)
``infersent``               [u; v; |u−v|; u∗v] → MLP: translation vs. mismatched pair (InferSent)
``distill_mlm``             masked-LM distillation from a frozen teacher (DistilBERT, TinyBERT)
``distill_sentence``        multilingual sentence-embedding distillation (Reimers & Gurevych 2020)
``text_infilling``          text infilling + sentence permutation, decoded (BART), encoder–decoder
``mbart_denoising``         BART's noise on documents of many languages, with language tags (mBART)
``span_corruption``         dropped spans → sentinels, the decoder writes the spans (T5)
``mass``                    decode the masked half-sentence fragment (MASS)
``xae``                     cross-lingual auto-encoding: encode one language, decode the other (XNLG)
``translation``             supervised translation with target-language tags
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
from .distill_mlm import DistillMLM, soft_cross_entropy, uniform_layer_map
from .distill_sentence import DistillSentence
from .examples import ExampleError, Pair, Sentence
from .gather import gather_with_grad
from .glm import GLM, infill_layout, sample_spans
from .infersent import InferSent, pair_features
from .itc import ITC, contrastive_loss
from .itm import ITM, sample_hard_negatives
from .masking import Masker, MaskingConfig, span_length_distribution, word_starts_from_pieces
from .mass import MASS
from .mbart_denoising import MBARTDenoising
from .mixture import Mixture, build_objective
from .mlm import MLM, MMLM
from .mlm_conditioned import ConditionedMLM
from .negatives import MINERS, HardNegatives, NegativeMiner, RandomNegatives
from .noising import poisson_span_lengths
from .plm import PLM
from .quick_thoughts import QuickThoughts, context_loss, context_targets
from .rtd import RTD
from .sbo import SpanBoundary, span_boundaries
from .segment_clm import SegmentCLM
from .segment_mlm import SegmentMLM
from .seq2seq_base import Seq2SeqObjective, is_seq2seq
from .skip_thoughts import ConditionalGRU, SkipThoughts, neighbour_triples
from .sop import NSP, SOP
from .span_corruption import SpanCorruption
from .teacher import load_teacher
from .text_infilling import TextInfilling
from .tlm import TLM
from .translation import Translation
from .translation_ranking import TranslationRanking, additive_margin_loss
from .unilm import MODES as UNILM_MODES
from .unilm import UniLM, unilm_visibility
from .xae import XAE
from .xlco import XLCo, info_nce

__all__ = [
    "ITC", "ITM", "ConditionedMLM", "contrastive_loss", "sample_hard_negatives",
    "CLM", "CLMLM", "CLPC", "CLWR", "ExampleError", "HardNegatives", "Loss", "MINERS", "MLM", "MMLM", "Masker",
    "MaskingConfig", "Mixture", "NSP", "NegativeMiner", "OBJECTIVES", "Objective", "Pair", "RTD",
    "RandomNegatives", "SOP", "Sentence", "TLM", "TranslationRanking", "XLCo", "additive_margin_loss",
    "build_objective", "gather_with_grad", "info_nce", "register_objective", "span_length_distribution",
    "word_starts_from_pieces", "Labelled", "SequenceClassification", "Tagged", "TokenClassification",
    "align_first_subword", "SpanBoundary", "span_boundaries", "PLM", "UniLM", "UNILM_MODES", "unilm_visibility",
    "GLM", "infill_layout", "poisson_span_lengths", "sample_spans", "ConditionalGRU", "InferSent", "QuickThoughts",
    "SkipThoughts", "context_loss", "context_targets", "neighbour_triples", "pair_features",
    "DistillMLM", "DistillSentence", "load_teacher", "soft_cross_entropy", "uniform_layer_map",
    "SegmentCLM", "SegmentMLM",
    "MASS", "MBARTDenoising", "Seq2SeqObjective", "SpanCorruption", "TextInfilling", "Translation", "XAE",
    "is_seq2seq",
]
