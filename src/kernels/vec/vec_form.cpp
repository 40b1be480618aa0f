// kernels/vec/vec_form.h: the one reading of ATTN_ISA as a cap on the forms
// of the kernels chosen at run time.
#include "kernels/vec/vec_form.h"

#include <optional>
#include <string>

#include "attn/core/env.h"

namespace attn::detail {

VecForm form_cap() {
  static const VecForm cap = [] {
    const std::optional<std::string> isa = isa_cap();  // an unknown name throws
    if (!isa || *isa == "avx512") return VecForm::avx512;
    return *isa == "avx2" ? VecForm::avx2 : VecForm::reference;
  }();
  return cap;
}

VecForm chosen_form(bool (*cpu_has)(VecForm)) {
  const VecForm cap = form_cap();
  for (const VecForm form : {VecForm::avx512, VecForm::avx2})
    if (form <= cap && cpu_has(form)) return form;
  return VecForm::reference;
}

}  // namespace attn::detail
