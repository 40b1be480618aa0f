// One product on oneDNN's matmul primitive (matmul_primitive.h): built once
// per geometry, type and thread count and kept per thread.
#include "ops/matmul_primitive.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstdint>
#include <map>
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

}  // namespace attn::detail
