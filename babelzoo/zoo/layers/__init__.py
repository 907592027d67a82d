"""Reusable parts that families compose: attention on one SDPA path with every mask kind,
feed-forward variants (MLP, GeGLU, SwiGLU), LayerNorm/RMSNorm, positions (learned, sinusoidal,
T5 buckets, NEZHA, rotary), token embeddings, the Transformer encoder and decoder blocks,
cross-attention, the decoder's key/value cache, the layer-stack API and output heads."""

from .attention import Packing, SelfAttention, attend, select_rows, take_rows
from .blocks import DecoderBlock, DecoderLayerState, LayerState, TransformerBlock
from .cache import KVCache, LayerCache
from .cross_attention import CrossAttention
from .dropout import Dropout, dropout
from .embeddings import TokenEmbeddings
from .ffn import ACTIVATIONS, FeedForward, GatedFeedForward, activation
from .init import init_weights
from .masks import build_attention_mask, causal_visibility, prefix_visibility, sliding_window_visibility
from .norms import make_norm
from .outputs import POOLINGS, MLMHead, Pooler, pool
from .positions import (
                        NezhaRelativePositions,
                        RotaryEmbedding,
                        T5RelativeBias,
                        apply_rotary,
                        sinusoidal_table,
                        sinusoids,
                        t5_relative_bucket,
)
from .stack import LayerStack

__all__ = ["ACTIVATIONS", "CrossAttention", "DecoderBlock", "DecoderLayerState", "Dropout", "KVCache", "LayerCache", "LayerState", "FeedForward", "GatedFeedForward", "LayerStack", "MLMHead",
           "NezhaRelativePositions", "Packing", "Pooler", "RotaryEmbedding", "SelfAttention", "T5RelativeBias",
           "TokenEmbeddings", "TransformerBlock", "activation", "apply_rotary", "attend", "build_attention_mask",
           "causal_visibility", "dropout", "init_weights", "make_norm", "pool", "POOLINGS", "prefix_visibility", "select_rows",
           "sinusoidal_table", "sinusoids", "sliding_window_visibility", "t5_relative_bucket", "take_rows"]
