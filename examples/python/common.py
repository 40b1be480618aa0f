"""What the Python examples share: the seed argument, as the C++ examples
take it (`--seed N`, default 0), and shapes printed as the library prints them."""
import argparse

import attn


def start(description):
    """Parses --seed (and --out, accepted for the C++ examples' command line;
    the Python examples draw no figures) and seeds attn's generator."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="out")
    args = p.parse_args()
    attn.manual_seed(args.seed)
    return args


def shape_str(shape):
    return "[" + ", ".join(str(n) for n in shape) + "]"
