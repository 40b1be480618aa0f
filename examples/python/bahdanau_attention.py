"""d2l 10.4 Bahdanau Attention: the RNN encoder-decoder whose decoder attends
to the encoder's outputs at every step, through the Python bindings; prints
the shapes the chapter prints for its toy batch (4 sequences of 7 tokens, a
vocabulary of 10, embed_size 8, num_hiddens 16, 2 layers)."""
import numpy as np

import attn
from common import shape_str, start


def main():
    start(__doc__)
    encoder = attn.nn.Seq2SeqEncoder(vocab_size=10, embed_size=8, num_hiddens=16, num_layers=2)
    encoder.eval()
    decoder = attn.nn.Seq2SeqAttentionDecoder(vocab_size=10, embed_size=8, num_hiddens=16,
                                              num_layers=2)
    decoder.eval()
    X = np.zeros((4, 7), np.int64)  # (batch_size, num_steps)
    state = decoder.init_state(encoder(X), None)
    with attn.nn.keep_attention_weights():
        output, state = decoder(X, state)
        weights = decoder.attention_weights
    print(f"output.shape = {shape_str(output.shape)}")
    print(f"len(state) = {len(state)}, state[0].shape = {shape_str(state[0].shape)}")
    print(f"state[1].shape = {shape_str(state[1].shape)}  (num_layers, batch_size, num_hiddens)")
    print(f"attention_weights.shape = {shape_str(weights.shape)}  (batch, queries, keys)")


if __name__ == "__main__":
    main()
