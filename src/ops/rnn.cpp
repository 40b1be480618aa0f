// The GRU layer: fused forward and backward (math in attn/ops/rnn.h), and the
// composite reference.
//
// Layout of what the forward keeps for the backward, per step t (T, B, 4H):
// r, z, n and hn = h_{t-1} W_hn^T + b_hn, the four (B, H) blocks side by side
// in each row. The outputs (T, B, H) are h_1 .. h_T; with h0 they give every
// h_{t-1} the backward needs. The products run on matmul/linear (oneDNN in
// f32, plain loops in f64); only the gate arithmetic is written here.
#include "attn/ops/rnn.h"

#include <cmath>

#include "attn/autograd/node.h"
#include "attn/core/threads.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/index.h"
#include "attn/ops/matmul.h"
#include "attn/ops/reduce.h"
#include "core/parallel.h"
#include "kernels/vec/vec_math.h"

namespace attn {

using autograd::Needs;
using autograd::record;

namespace {

// The gates' sigmoid and tanh are kernels/vec/vec_math.h's, which vectorize in the
// `omp simd` loops below (libm's expf and tanhf are scalar calls that took
// 80% of a layer's time).
using detail::sigmoid_simd;
using detail::tanh_simd;

// One step's gates and new state. xg (B, 3H): the input projection with b_ih;
// hg (B, 3H): the recurrent projection with b_hh; h (B, H) the previous
// state. Writes h_new (B, H) and gates (B, 4H) = [r, z, n, hn] (gates may be
// null: inference keeps nothing).
template <class T>
void gru_gates(const T* xg, const T* hg, const T* h, T* h_new, T* gates, std::int64_t B,
               std::int64_t H) {
  detail::parallel_for(B, detail::loop_threads(B > 1 && B * H >= parallel_grain()),
                       [&](std::int64_t b) {
                         const T* xr = xg + b * 3 * H;
                         const T* hr = hg + b * 3 * H;
                         const T* hp = h + b * H;
                         T* o = h_new + b * H;
                         T* g = gates ? gates + b * 4 * H : nullptr;
#pragma omp simd
                         for (std::int64_t j = 0; j < H; ++j) {
                           const T r = sigmoid_simd(xr[j] + hr[j]);
                           const T z = sigmoid_simd(xr[H + j] + hr[H + j]);
                           const T hn = hr[2 * H + j];
                           const T n = tanh_simd(xr[2 * H + j] + r * hn);
                           o[j] = (T(1) - z) * n + z * hp[j];
                           if (g) {
                             g[j] = r;
                             g[H + j] = z;
                             g[2 * H + j] = n;
                             g[3 * H + j] = hn;
                           }
                         }
                       });
}

// One step backward through the gates. dh (B, H): the gradient reaching h_t;
// on return it holds dh * z (the direct part of dh_{t-1}). Writes gx, gh (B, 3H).
template <class T>
void gru_gates_backward(T* dh, const T* gates, const T* h_prev, T* gx, T* gh, std::int64_t B,
                        std::int64_t H) {
  detail::parallel_for(B, detail::loop_threads(B > 1 && B * H >= parallel_grain()),
                       [&](std::int64_t b) {
                         const T* g = gates + b * 4 * H;
                         const T* hp = h_prev + b * H;
                         T* d = dh + b * H;
                         T* ox = gx + b * 3 * H;
                         T* oh = gh + b * 3 * H;
#pragma omp simd
                         for (std::int64_t j = 0; j < H; ++j) {
                           const T r = g[j], z = g[H + j], n = g[2 * H + j], hn = g[3 * H + j];
                           const T dn = d[j] * (T(1) - z) * (T(1) - n * n);
                           const T dz = d[j] * (hp[j] - n) * z * (T(1) - z);
                           const T dr = dn * hn * r * (T(1) - r);
                           ox[j] = dr;
                           ox[H + j] = dz;
                           ox[2 * H + j] = dn;
                           oh[j] = dr;
                           oh[H + j] = dz;
                           oh[2 * H + j] = dn * r;
                           d[j] *= z;
                         }
                       });
}

void check_gru(const Tensor& X, const Tensor& h0, const Tensor& w_ih, const Tensor& w_hh,
               const Tensor& b_ih, const Tensor& b_hh, const char* op) {
  ATTN_CHECK(X.dim() == 3, ShapeError, "{}: X must be (T, B, I), got {}", op, shape_str(X.shape()));
  const std::int64_t B = X.size(1), I = X.size(2);
  ATTN_CHECK(w_hh.dim() == 2 && w_hh.size(0) % 3 == 0 && w_hh.size(0) == 3 * w_hh.size(1),
             ShapeError, "{}: w_hh must be (3H, H), got {}", op, shape_str(w_hh.shape()));
  const std::int64_t H = w_hh.size(1);
  ATTN_CHECK(w_ih.shape() == (Shape{3 * H, I}), ShapeError,
             "{}: w_ih must be (3H, I) = [{}, {}] for X {} and w_hh {}, got {}", op, 3 * H, I,
             shape_str(X.shape()), shape_str(w_hh.shape()), shape_str(w_ih.shape()));
  ATTN_CHECK(h0.shape() == (Shape{B, H}), ShapeError, "{}: h0 must be (B, H) = [{}, {}], got {}",
             op, B, H, shape_str(h0.shape()));
  for (const auto* b : {&b_ih, &b_hh}) {
    if (!b->defined()) continue;
    ATTN_CHECK(b->shape() == Shape{3 * H}, ShapeError, "{}: a bias must be (3H) = [{}], got {}", op,
               3 * H, shape_str(b->shape()));
    ATTN_CHECK(b->dtype() == X.dtype(), DTypeError, "{}: a bias is {} but X is {}", op,
               dtype_name(b->dtype()), dtype_name(X.dtype()));
  }
  for (const auto* t : {&h0, &w_ih, &w_hh})
    ATTN_CHECK(t->dtype() == X.dtype(), DTypeError, "{}: X is {} but h0 or a weight is {}", op,
               dtype_name(X.dtype()), dtype_name(t->dtype()));
  ATTN_CHECK(X.dtype() == DType::f32 || X.dtype() == DType::f64, DTypeError,
             "{}: expected f32 or f64, got {}", op, dtype_name(X.dtype()));
}

Tensor detached(const Tensor& t) { return t.defined() ? t.detach().contiguous() : Tensor(); }

}  // namespace

Tensor gru(const Tensor& X, const Tensor& h0, const Tensor& w_ih, const Tensor& w_hh,
           const Tensor& b_ih, const Tensor& b_hh) {
  check_gru(X, h0, w_ih, w_hh, b_ih, b_hh, "gru");
  const std::int64_t T = X.size(0), B = X.size(1), I = X.size(2), H = w_hh.size(1);
  const DType dt = X.dtype();
  if (T == 0) return Tensor::empty({0, B, H}, dt);
  const bool keep = autograd::any_requires_grad({X, h0, w_ih, w_hh, b_ih, b_hh});
  Tensor x = detached(X), h_0 = detached(h0), wi = detached(w_ih), wh = detached(w_hh);
  Tensor bi = detached(b_ih), bh = detached(b_hh);
  Tensor out = Tensor::empty({T, B, H}, dt);
  Tensor gates = keep ? Tensor::empty({T, B, 4 * H}, dt) : Tensor();
  {
    autograd::NoGradGuard no_grad;
    Tensor xg = linear(x.reshape({T * B, I}), wi, bi);  // (T B, 3H)
    for (std::int64_t t = 0; t < T; ++t) {
      Tensor h = t ? out.select(0, t - 1) : h_0;
      Tensor hg = linear(h, wh, bh).contiguous();  // (B, 3H)
      dispatch_float(dt, "gru", [&]<class S>() {
        gru_gates<S>(xg.data<S>() + t * B * 3 * H, hg.data<S>(), h.data<S>(),
                     out.data<S>() + t * B * H, keep ? gates.data<S>() + t * B * 4 * H : nullptr, B,
                     H);
      });
    }
  }
  if (!keep) return out;
  return record(
      out, "gru", {X, h0, w_ih, w_hh, b_ih, b_hh},
      [x, h_0, wi, wh, gates, hs = out.detach(), T, B, I, H](const Tensor& g_out,
                                                             const Needs& need) {
        autograd::NoGradGuard no_grad;
        const DType dt = x.dtype();
        Tensor g = g_out.contiguous();
        Tensor gx = Tensor::empty({T, B, 3 * H}, dt), gh = Tensor::empty({T, B, 3 * H}, dt);
        Tensor dh = zeros({B, H}, dt);
        for (std::int64_t t = T - 1; t >= 0; --t) {
          Tensor h_prev = t ? hs.select(0, t - 1) : h_0;
          dh = add(dh, g.select(0, t)).contiguous();
          dispatch_float(dt, "gru backward", [&]<class S>() {
            gru_gates_backward<S>(dh.data<S>(), gates.data<S>() + t * B * 4 * H, h_prev.data<S>(),
                                  gx.data<S>() + t * B * 3 * H, gh.data<S>() + t * B * 3 * H, B, H);
          });
          if (t > 0 || need[1]) dh = add(dh, matmul(gh.select(0, t), wh));
        }
        Tensor gx2 = gx.reshape({T * B, 3 * H}), gh2 = gh.reshape({T * B, 3 * H});
        std::vector<Tensor> grads(6);
        if (need[0]) grads[0] = matmul(gx2, wi).reshape({T, B, I});
        if (need[1]) grads[1] = dh;
        if (need[2]) grads[2] = matmul(gx2.transpose(0, 1), x.reshape({T * B, I}));
        if (need[3]) {
          // [h_0 .. h_{T-1}]: h0, then the outputs but the last.
          Tensor prev =
              T > 1 ? cat({h_0.unsqueeze(0), hs.narrow(0, 0, T - 1)}, 0) : h_0.unsqueeze(0);
          grads[3] = matmul(gh2.transpose(0, 1), prev.reshape({T * B, H}));
        }
        if (need[4]) grads[4] = sum(gx2, {0});
        if (need[5]) grads[5] = sum(gh2, {0});
        return grads;
      });
}

Tensor gru_reference(const Tensor& X, const Tensor& h0, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih, const Tensor& b_hh) {
  check_gru(X, h0, w_ih, w_hh, b_ih, b_hh, "gru_reference");
  const std::int64_t T = X.size(0), H = w_hh.size(1);
  auto part = [H](const Tensor& t, std::int64_t k) { return t.narrow(-1, k * H, H); };
  std::vector<Tensor> outputs;
  Tensor h = h0;
  for (std::int64_t t = 0; t < T; ++t) {
    Tensor xg = linear(X.select(0, t), w_ih, b_ih), hg = linear(h, w_hh, b_hh);
    Tensor r = sigmoid(add(part(xg, 0), part(hg, 0)));
    Tensor z = sigmoid(add(part(xg, 1), part(hg, 1)));
    Tensor n = tanh(add(part(xg, 2), mul(r, part(hg, 2))));
    h = add(mul(rsub(1.0, z), n), mul(z, h));
    outputs.push_back(h);
  }
  if (outputs.empty()) return zeros({0, X.size(1), H}, X.dtype());
  return stack(outputs, 0);
}

}  // namespace attn
