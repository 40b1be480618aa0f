// attn/autograd/node.h — the define-by-run graph.
//
// Every differentiable op computes its result and, in the same function,
// records a Node on it: the inputs it was computed from and a closure that maps
// the gradient of the output to the gradients of those inputs. backward() walks
// the nodes in reverse topological order and accumulates gradients into the
// leaves (tensors with requires_grad and no grad_fn).
//
// Closures must not capture the output tensor itself (that would be a cycle,
// output -> node -> closure -> output): capture out.detach() instead.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "attn/core/tensor.h"

namespace attn::autograd {

// A backward's result, one gradient per input (an undefined Tensor where an
// input needs none), and which inputs want one.
using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

// Maps the output's gradient to one gradient per input; `needs[i]` says
// whether input i wants one.
using BackwardFn = std::function<Grads(const Tensor& grad_output, const Needs& needs)>;

struct Node {
  std::string name;
  std::vector<Tensor> inputs;
  BackwardFn backward;
};

// Is gradient recording on for this thread? (off inside a NoGradGuard)
bool grad_enabled();

// Turns recording off for its lifetime: inference, optimizer updates.
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// True when recording is on and any input requires a gradient.
bool any_requires_grad(const std::vector<Tensor>& inputs);

// Records `fn` as the way to differentiate `output` with respect to `inputs`,
// when any_requires_grad(inputs). Returns output.
Tensor record(Tensor output, std::string name, std::vector<Tensor> inputs, BackwardFn fn);

// Runs backpropagation from `root` seeded with `grad_root` (same shape).
void run_backward(const Tensor& root, const Tensor& grad_root);

}  // namespace attn::autograd
