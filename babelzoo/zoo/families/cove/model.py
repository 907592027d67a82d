"""CoVe's modules: a bidirectional LSTM encoder and an attentional LSTM decoder with input
feeding (Luong et al. 2015), as in McCann et al. (2017). Config and entries:
:mod:`babelzoo.zoo.families.cove.config`."""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ....errors import ConfigError, InputError
from ...model_config import ModelConfig
from .config import CoVeConfig
from ...generation import Generates, GenerationSettings
from ...layers import Dropout, attend, build_attention_mask, init_weights
from ...layers.masks import check_mask_shapes
from ...checkpoint_io import Checkpointed
from ...sentences import EncoderDecoderReadsText, encode_or_states
from ..seq2seq.model import Seq2SeqOutput

State = tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]  # the LSTM's (h, c) and the last attentional state


def run_lstm(lstm: nn.LSTM, x: torch.Tensor, state: Optional[tuple[torch.Tensor, torch.Tensor]]):
    """``lstm(x, state)``, in float32 under CPU fp16 autocast: oneDNN has no fp16 LSTM kernel for
    an unpacked sequence on the CPU, and autocast would hand it one."""
    if x.device.type == "cpu" and torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.float16:
        with torch.autocast("cpu", enabled=False):
            return lstm(x.float(), None if state is None else tuple(s.float() for s in state))
    return lstm(x, state)


class CoVeModel(EncoderDecoderReadsText, Generates, Checkpointed, nn.Module):
    """CoVe's encoder–decoder; the same forward and ``generate`` as
    :class:`~babelzoo.zoo.families.seq2seq.model.Seq2SeqModel`::

        model = babelzoo.create_model("cove_tiny", vocab_size=1000)
        out = model(input_ids=src, decoder_input_ids=tgt_in)   # out.logits [B, T, 1000]
        vectors = out.encoder_last_hidden                        # the contextual word vectors
        sentences = model.encode(["Hello", "Bonjour"])           # with a tokenizer: those, mean-pooled
    """

    encoder_directions = 2  # the bidirectional LSTM's forward states, then its backward states

    def __init__(self, config: ModelConfig):
        super().__init__()
        text = config.text
        if not isinstance(text, CoVeConfig):
            raise ConfigError(f"CoVeModel needs a CoVeConfig text part, got {type(text).__name__}")
        self.config = config
        generator = torch.Generator().manual_seed(int(torch.randint(0, 2 ** 62, ())))
        e, h = text.embedding_size, text.hidden_size
        between = text.dropout if text.num_layers > 1 else 0.0
        self.word = nn.Embedding(text.vocab_size, e, padding_idx=text.pad_token_id)
        self.encoder = nn.LSTM(e, h // 2, num_layers=text.num_layers, batch_first=True, bidirectional=True,
                               dropout=between)
        self.decoder = nn.LSTM(e + h, h, num_layers=text.num_decoder_layers, batch_first=True,
                               dropout=text.dropout if text.num_decoder_layers > 1 else 0.0)
        self.query = nn.Linear(h, h)  # W_q: the decoder state as a query over the encoder's states
        self.combine = nn.Linear(2 * h, h)  # h̃_t = tanh(W_c [c_t; h_t] + b)
        self.lm_head = nn.Linear(h, text.vocab_size)
        self.dropout = Dropout(text.dropout)
        for module in self.modules():
            init_weights(module, text.init_std, generator)

    @property
    def word_embeddings(self) -> nn.Embedding:
        return self.word

    def encode(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None, **options):
        """The encoder's states [B, S, H] (zeros at padding), padding packed away. Given
        sentences (a str or a list of str) instead, their vectors, with :meth:`ReadsText.encode
        <babelzoo.zoo.sentences.ReadsText.encode>`'s keyword options."""
        vectors = encode_or_states(self, input_ids, attention_mask, options)
        if vectors is not None:
            return vectors
        text = self.config.text
        if input_ids.shape[1] > text.max_positions:
            raise InputError(f"the source input has {input_ids.shape[1]} positions but the model holds "
                             f"{text.max_positions} (CoVeConfig.max_positions); shorten it")
        check_mask_shapes(input_ids, attention_mask)
        if attention_mask is None:
            attention_mask = input_ids.ne(text.pad_token_id).long()
        lengths = attention_mask.sum(dim=1).clamp(min=1).cpu()
        packed = pack_padded_sequence(self.dropout(self.word(input_ids)), lengths, batch_first=True,
                                      enforce_sorted=False)
        out, _ = self.encoder(packed)
        return pad_packed_sequence(out, batch_first=True, total_length=input_ids.shape[1])[0]

    def step(self, tokens: torch.Tensor, state: Optional[State], encoded: torch.Tensor,
             mask: Optional[torch.Tensor]) -> tuple[torch.Tensor, State]:
        """One decoder step for tokens [N]: h_t = LSTM([e(y_{t-1}); h̃_{t-1}]), c_t = attention of
        W_q·h_t over the encoder's states, h̃_t = tanh(W_c [c_t; h_t]); returns h̃_t [N, H] and
        the new state."""
        n, h = tokens.shape[0], self.config.text.hidden_size
        feed = encoded.new_zeros(n, h) if state is None else state[1]
        lstm_state = None if state is None else state[0]
        x = torch.cat([self.dropout(self.word(tokens)), feed], dim=-1)[:, None]
        out, lstm_state = run_lstm(self.decoder, x, lstm_state)
        top = out[:, 0]
        q = self.query(top)[:, None, None]  # [N, 1, 1, H]: one head, the whole width
        context = attend(q, encoded[:, None], encoded[:, None], mask=mask, scale=1.0)[:, 0, 0]
        attentional = torch.tanh(self.combine(torch.cat([context, top], dim=-1)))
        return attentional, (lstm_state, attentional)

    def logits(self, attentional: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.dropout(attentional))

    def forward(self, input_ids: Optional[torch.Tensor] = None, attention_mask: Optional[torch.Tensor] = None,
                decoder_input_ids: Optional[torch.Tensor] = None,
                decoder_attention_mask: Optional[torch.Tensor] = None,
                encoder_last_hidden: Optional[torch.Tensor] = None) -> Seq2SeqOutput:
        """Teacher-forced pass, as :meth:`Seq2SeqModel.forward <babelzoo.zoo.families.seq2seq.model.Seq2SeqModel.forward>`;
        the decoder runs left to right, so ``decoder_attention_mask`` changes nothing at real
        positions."""
        text = self.config.text
        if decoder_input_ids is None:
            raise InputError(f"model {self.config.architecture!r} needs decoder_input_ids (the target shifted right "
                             f"behind the start token)")
        if decoder_input_ids.shape[1] > text.max_positions:
            raise InputError(f"the target input has {decoder_input_ids.shape[1]} positions but the model holds "
                             f"{text.max_positions} (CoVeConfig.max_positions); shorten it")
        check_mask_shapes(decoder_input_ids, decoder_attention_mask,
                          names=("decoder_input_ids", "decoder_attention_mask"))
        if attention_mask is None and input_ids is not None:
            attention_mask = input_ids.ne(text.pad_token_id).long()
        if encoder_last_hidden is None:
            if input_ids is None:
                raise InputError("give input_ids (the source) or encoder_last_hidden")
            encoder_last_hidden = self.encode(input_ids, attention_mask)
        elif attention_mask is not None:
            check_mask_shapes(encoder_last_hidden, attention_mask, names=("encoder_last_hidden", "attention_mask"))
        mask = build_attention_mask(attention_mask)
        state, states = None, []
        for t in range(decoder_input_ids.shape[1]):
            attentional, state = self.step(decoder_input_ids[:, t], state, encoder_last_hidden, mask)
            states.append(attentional)
        hidden = torch.stack(states, dim=1)
        return Seq2SeqOutput(self.logits(hidden), encoder_last_hidden, hidden, attention_mask)

    def decoding(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, settings: GenerationSettings):
        """The step and reorder functions of :func:`~babelzoo.zoo.generation.generate`: the source
        is encoded once; the decoder's state is the recurrent cache."""
        beams = settings.num_beams
        encoded = self.encode(input_ids, attention_mask).repeat_interleave(beams, dim=0)
        mask = build_attention_mask(attention_mask.repeat_interleave(beams, dim=0))
        holder: dict[str, Optional[State]] = {"state": None}

        def step(tokens: torch.Tensor) -> torch.Tensor:
            attentional, holder["state"] = self.step(tokens[:, 0], holder["state"], encoded, mask)
            return self.logits(attentional)

        def reorder(rows: torch.Tensor) -> None:
            (h, c), feed = holder["state"]
            holder["state"] = ((h.index_select(1, rows), c.index_select(1, rows)), feed.index_select(0, rows))

        return step, reorder


def build(config: CoVeConfig, knowledge=None):
    raise ConfigError("family 'cove' builds a CoVeModel (an encoder–decoder), not an encoder with parts; it cannot "
                      "serve as a text tower or an encoder of another model")
