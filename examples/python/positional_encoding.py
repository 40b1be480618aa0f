"""d2l 10.6.3 Positional Encoding, through the Python bindings: sinusoids of
decreasing frequency along the encoding dimension, and the relative-position
property (a 2x2 rotation maps row i's pair of columns to row i + d's); prints
what examples/positional_encoding.cpp prints (without its figures)."""
import math

import numpy as np

import attn
from common import start


def main():
    start(__doc__)
    encoding_dim, num_steps = 32, 60
    pos_encoding = attn.nn.PositionalEncoding(encoding_dim, 0)
    pos_encoding.eval()
    pos_encoding(np.zeros((1, num_steps, encoding_dim), np.float32))
    P = np.asarray(pos_encoding.P)[:, :num_steps, :]
    print("P[0, 1:3, :10] =")
    print(attn.tensor(P[0, 1:3, :10]), end="\n\n")
    for i in range(8):
        print(f"{i} in binary is {i:03b}")
    print()
    for delta in (1, 5, 10):
        worst = 0.0
        for i in range(num_steps - delta):
            for j in range(encoding_dim // 2):
                w = 1.0 / math.pow(10000.0, 2.0 * j / encoding_dim)
                c, s = math.cos(delta * w), math.sin(delta * w)
                a, b = float(P[0, i, 2 * j]), float(P[0, i, 2 * j + 1])
                worst = max(worst, abs(c * a + s * b - float(P[0, i + delta, 2 * j])),
                            abs(-s * a + c * b - float(P[0, i + delta, 2 * j + 1])))
        print(f"offset {delta:2}: max |R(d w) p_i - p_(i+d)| over all i, j = {worst:.2e}")
        assert worst < 1e-4, worst


if __name__ == "__main__":
    main()
