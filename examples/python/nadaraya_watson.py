"""d2l 10.2 Attention Pooling: Nadaraya-Watson kernel regression, through the
Python bindings; prints what examples/nadaraya_watson.cpp prints (without
its figures).

50 training points x sorted from rand * 5, y = 2 sin x + x^0.8 + N(0, 0.5);
50 test points 0, 0.1, ..., 4.9. Three estimators: average pooling, the
nonparametric Gaussian kernel, and the kernel with one learned width w
(trained with leave-one-out keys, SGD lr 0.5, 5 epochs).
"""
import numpy as np

import attn
from common import start


def f(x):
    return x.sin() * 2.0 + x ** 0.8


def main():
    start(__doc__)
    n_train = 50
    x_train = attn.tensor(np.sort(np.asarray(attn.rand((n_train,)) * 5.0)))
    y_train = f(x_train) + attn.normal(0.0, 0.5, (n_train,))
    x_test = attn.arange(0.0, 5.0, 0.1)
    n_test = x_test.numel()
    print(f"n_train = {n_train}, n_test = {n_test}")

    y_avg = attn.nn.nw_average_pooling(y_train, n_test)
    print(f"average pooling predicts {np.asarray(y_avg)[0]:.4f} everywhere")
    y_hat, weights = attn.nn.nw_nonparametric(x_test, x_train, y_train)

    # Parametric: the keys and values of row i are every training point but the i-th.
    x, y = np.asarray(x_train), np.asarray(y_train)
    others = ~np.eye(n_train, dtype=bool)
    keys = np.ascontiguousarray(np.broadcast_to(x, (n_train, n_train))[others]
                                .reshape(n_train, n_train - 1))
    values = np.ascontiguousarray(np.broadcast_to(y, (n_train, n_train))[others]
                                  .reshape(n_train, n_train - 1))
    net = attn.nn.NWKernelRegression()
    trainer = attn.optim.SGD(net.parameters(), lr=0.5)
    for epoch in range(5):
        trainer.zero_grad()
        diff = net(x_train, keys, values) - y_train
        loss = (diff * diff).sum()  # MSELoss(reduction='none'), summed
        loss.backward()
        trainer.step()
        print(f"epoch {epoch + 1}, loss {loss.item():.6f}")
    print(f"learned w = {net.w.item():.4f}")


if __name__ == "__main__":
    main()
