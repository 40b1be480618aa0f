// One product on oneDNN's matmul primitive (matmul_primitive.h): built once
// per geometry, type and thread count and kept per thread.
#include "ops/matmul_primitive.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string_view>
#include <vector>

namespace attn::detail {

namespace {

struct PrimitiveEntry {
  bool usable = false;  // false when oneDNN offers only its slow reference kernel
  dnnl::matmul prim;
  dnnl::memory a, b, c;
};

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

PrimitiveEntry build_primitive(dnnl::memory::data_type ab, const dnnl::memory::dims& ad,
                               const dnnl::memory::dims& as, const dnnl::memory::dims& bd,
                               const dnnl::memory::dims& bs, const dnnl::memory::dims& cd) {
  const dnnl::engine& engine = cpu_engine();
  using dt = dnnl::memory::data_type;
  PrimitiveEntry e;
  try {
    dnnl::memory::dims cs(cd.size());
    std::int64_t stride = 1;
    for (std::size_t d = cd.size(); d-- > 0;) {
      cs[d] = stride;
      stride *= cd[d];
    }
    dnnl::memory::desc a(ad, ab, as), b(bd, ab, bs), c(cd, dt::f32, cs);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), engine);
    if (std::string_view(pd.impl_info_str()).starts_with("ref")) return e;
    e.prim = dnnl::matmul(pd);
    e.a = dnnl::memory(a, engine, DNNL_MEMORY_NONE);
    e.b = dnnl::memory(b, engine, DNNL_MEMORY_NONE);
    e.c = dnnl::memory(c, engine, DNNL_MEMORY_NONE);
    e.usable = true;
  } catch (const dnnl::error&) {
    e.usable = false;  // a geometry oneDNN does not take: the caller loops over dnnl_sgemm
  }
  return e;
}

}  // namespace

bool primitive_product(dnnl::memory::data_type ab, const void* pa, const dnnl::memory::dims& ad,
                       const dnnl::memory::dims& as, const void* pb, const dnnl::memory::dims& bd,
                       const dnnl::memory::dims& bs, float* pc, const dnnl::memory::dims& cd) {
  // oneDNN plans a primitive's threading when it is built: the thread count is
  // part of the key (1 inside an OpenMP parallel region, as oneDNN counts).
  std::vector<std::int64_t> key = {omp_in_parallel() ? 1 : omp_get_max_threads(),
                                   static_cast<std::int64_t>(ab)};
  for (const auto* v : {&ad, &as, &bd, &bs, &cd}) {
    key.push_back(static_cast<std::int64_t>(v->size()));
    key.insert(key.end(), v->begin(), v->end());
  }
  thread_local std::map<std::vector<std::int64_t>, PrimitiveEntry> cache;
  auto it = cache.find(key);
  if (it == cache.end()) {
    if (cache.size() >= 512) cache.clear();
    it = cache.emplace(std::move(key), build_primitive(ab, ad, as, bd, bs, cd)).first;
  }
  PrimitiveEntry& e = it->second;
  if (!e.usable) return false;
  thread_local dnnl::stream stream(cpu_engine());
  try {
    e.a.set_data_handle(const_cast<void*>(pa));
    e.b.set_data_handle(const_cast<void*>(pb));
    e.c.set_data_handle(pc);
  } catch (const dnnl::error&) {
    return false;
  }
  // The C API spares building the C++ API's argument map on every call.
  const dnnl_exec_arg_t args[] = {
      {DNNL_ARG_SRC, e.a.get()}, {DNNL_ARG_WEIGHTS, e.b.get()}, {DNNL_ARG_DST, e.c.get()}};
  return dnnl_primitive_execute(e.prim.get(), stream.get(), 3, args) == dnnl_success &&
         dnnl_stream_wait(stream.get()) == dnnl_success;
}

// ---- products on packed weights ----

namespace {

std::unique_ptr<PackedPrimitive> build_packed_primitive(dnnl::memory::data_type at,
                                                        dnnl::memory::data_type bt,
                                                        dnnl::memory::data_type ct, std::int64_t M,
                                                        std::int64_t K, std::int64_t N, bool bias,
                                                        bool relu) {
  using dt = dnnl::memory::data_type;
  const dnnl::engine& engine = cpu_engine();
  try {
    dnnl::memory::desc a({M, K}, at, dnnl::memory::dims{K, 1});
    dnnl::memory::desc b({K, N}, bt, dnnl::memory::format_tag::any);
    dnnl::memory::desc c({M, N}, ct, dnnl::memory::dims{N, 1});
    dnnl::memory::desc bd({1, N}, dt::f32, dnnl::memory::dims{N, 1});
    dnnl::primitive_attr attr;
    if (relu) {
      dnnl::post_ops ops;
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
      attr.set_post_ops(ops);
    }
    dnnl::matmul::primitive_desc pd(
        bias ? dnnl::matmul::desc(a, b, bd, c) : dnnl::matmul::desc(a, b, c), attr, engine);
    const std::string_view impl = pd.impl_info_str();
    if (impl.starts_with("ref")) return nullptr;
    auto p = std::make_unique<PackedPrimitive>();
    p->impl = std::string(impl);
    p->prim = dnnl::matmul(pd);
    p->weights = pd.weights_desc();
    p->a = dnnl::memory(a, engine, DNNL_MEMORY_NONE);
    if (bias) p->bias = dnnl::memory(bd, engine, DNNL_MEMORY_NONE);
    p->c = dnnl::memory(c, engine, DNNL_MEMORY_NONE);
    return p;
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

}  // namespace

PackedPrimitive* packed_primitive(dnnl::memory::data_type at, dnnl::memory::data_type bt,
                                  dnnl::memory::data_type ct, std::int64_t M, std::int64_t K,
                                  std::int64_t N, bool bias, bool relu) {
  const std::array<std::int64_t, 9> key = {omp_in_parallel() ? 1 : omp_get_max_threads(),
                                           static_cast<std::int64_t>(at),
                                           static_cast<std::int64_t>(bt),
                                           static_cast<std::int64_t>(ct),
                                           M,
                                           K,
                                           N,
                                           bias,
                                           relu};
  thread_local std::map<std::array<std::int64_t, 9>, std::unique_ptr<PackedPrimitive>> cache;
  auto it = cache.find(key);
  if (it == cache.end()) {
    if (cache.size() >= 512) cache.clear();
    it = cache.emplace(key, build_packed_primitive(at, bt, ct, M, K, N, bias, relu)).first;
  }
  return it->second.get();
}

dnnl::memory pack_weights(dnnl::memory::data_type t, const void* w, std::int64_t K, std::int64_t N,
                          const dnnl::memory::dims& strides, const dnnl::memory::desc& layout,
                          void* buffer) {
  const dnnl::engine& engine = cpu_engine();
  try {
    dnnl::memory::desc plain({K, N}, t, strides);
    dnnl::memory src(plain, engine, const_cast<void*>(w));
    dnnl::memory dst =
        buffer != nullptr ? dnnl::memory(layout, engine, buffer) : dnnl::memory(layout, engine);
    dnnl::reorder(src, dst).execute(thread_stream(), src, dst);
    thread_stream().wait();
    return dst;
  } catch (const dnnl::error&) {
    return dnnl::memory();
  }
}

bool run_packed_primitive(PackedPrimitive& p, const void* a, const dnnl::memory& b,
                          const float* bias, void* c) {
  try {
    p.a.set_data_handle(const_cast<void*>(a));
    p.c.set_data_handle(c);
    if (bias != nullptr) p.bias.set_data_handle(const_cast<float*>(bias));
  } catch (const dnnl::error&) {
    return false;
  }
  const dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, p.a.get()},
                                  {DNNL_ARG_WEIGHTS, b.get()},
                                  {DNNL_ARG_DST, p.c.get()},
                                  {DNNL_ARG_BIAS, bias != nullptr ? p.bias.get() : nullptr}};
  dnnl::stream& stream = thread_stream();
  return dnnl_primitive_execute(p.prim.get(), stream.get(), bias != nullptr ? 4 : 3, args) ==
             dnnl_success &&
         dnnl_stream_wait(stream.get()) == dnnl_success;
}

}  // namespace attn::detail
