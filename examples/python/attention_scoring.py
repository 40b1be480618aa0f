"""d2l 10.3 Attention Scoring Functions: masked softmax, additive attention and
scaled dot-product attention on the chapter's toy inputs, through the Python
bindings; prints what examples/attention_scoring.cpp prints (without its
heatmaps)."""
import numpy as np

import attn
from common import start


def main():
    start(__doc__)
    print("masked_softmax(rand(2, 2, 4), tensor([2, 3]))")
    print(attn.ops.masked_softmax(attn.rand((2, 2, 4)), np.array([2, 3])), end="\n\n")
    print("masked_softmax(rand(2, 2, 4), tensor([[1, 3], [2, 4]]))")
    print(attn.ops.masked_softmax(attn.rand((2, 2, 4)), np.array([[1, 3], [2, 4]])), end="\n\n")

    keys = np.ones((2, 10, 2), np.float32)
    values = np.tile(np.arange(40, dtype=np.float32).reshape(1, 10, 4), (2, 1, 1))
    valid_lens = np.array([2, 6])

    queries = attn.normal(0, 1, (2, 1, 20))
    additive = attn.nn.AdditiveAttention(key_size=2, query_size=20, num_hiddens=8, dropout=0.1)
    additive.eval()
    print("AdditiveAttention(key_size=2, query_size=20, num_hiddens=8, dropout=0.1)")
    print(additive(queries, keys, values, valid_lens), end="\n\n")

    queries = attn.normal(0, 1, (2, 1, 2))
    dot = attn.nn.DotProductAttention(dropout=0.5)
    with attn.nn.keep_attention_weights():  # the chapter looks at the weights
        dot.eval()
        print("DotProductAttention(dropout=0.5)")
        print(dot(queries, keys, values, valid_lens), end="\n\n")
        weights = dot.attention_weights
    assert weights.shape == (2, 1, 10)
    print("Every key is the same vector, so the valid keys share the weight evenly\n"
          "(1/2 in the first batch, 1/6 in the second) and the masked ones get 0.")


if __name__ == "__main__":
    main()
