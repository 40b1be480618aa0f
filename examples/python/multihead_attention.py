"""d2l 10.5 Multi-Head Attention and 10.6 Self-Attention, through the Python
bindings; prints what examples/multihead_attention.cpp prints (without its
heatmap)."""
import numpy as np

import attn
from common import shape_str, start


def main():
    start(__doc__)
    num_hiddens, num_heads = 100, 5
    attention = attn.nn.MultiHeadAttention(num_hiddens, num_hiddens, num_hiddens, num_hiddens,
                                           num_heads, 0.5)
    attention.eval()
    print(f"MultiHeadAttention(100, 100, 100, 100, num_heads=5, dropout=0.5): "
          f"{attention.num_parameters()} parameters")
    batch_size, num_queries, num_kvpairs = 2, 4, 6
    valid_lens = np.array([3, 2])
    X = np.ones((batch_size, num_queries, num_hiddens), np.float32)
    Y = np.ones((batch_size, num_kvpairs, num_hiddens), np.float32)
    with attn.nn.keep_attention_weights():  # the chapter prints and draws the weights
        out = attention(X, Y, Y, valid_lens)
        print(f"attention(X, Y, Y, valid_lens).shape = {shape_str(out.shape)}")
        print(f"attention_weights.shape = {shape_str(attention.attention_weights.shape)}  "
              "(batch * heads, queries, keys)")
        # Self-attention: queries, keys and values are the same tokens.
        Xr = attn.randn((batch_size, num_queries, num_hiddens))
        out = attention(Xr, Xr, Xr, valid_lens)
        print(f"self-attention: attention(X, X, X, valid_lens).shape = {shape_str(out.shape)}")


if __name__ == "__main__":
    main()
