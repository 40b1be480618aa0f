// attn/core/enum_names.h — the text of an option that is an enum, written
// once per enum: the names a flag, config.json and the checkpoint use, and
// the parse at the edge that turns them into the enum (a ValueError naming
// the text and the choices for anything else). Inside attn an option is
// never a string compared again.
//
// An enum opts in by specializing EnumNames beside its definition:
//
//   enum class Loss { d2l, token };
//   template <> struct EnumNames<Loss> {
//     static constexpr const char* what = "loss";
//     static constexpr std::array<const char*, 2> names{"d2l", "token"};
//   };
//
// names[i] is the name of the enumerator whose value is i.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

#include "attn/core/error.h"

namespace attn {

template <class E>
struct EnumNames;  // specialized per enum: `what` and `names`

template <class E>
concept NamedEnum = std::is_enum_v<E> && requires {
  EnumNames<E>::what;
  EnumNames<E>::names;
};

// The name of `e` ("inverse-sqrt").
template <NamedEnum E>
const char* enum_name(E e) {
  const auto i = static_cast<std::size_t>(e);
  ATTN_CHECK(i < EnumNames<E>::names.size(), ValueError, "{}: no name for value {}",
             EnumNames<E>::what, i);
  return EnumNames<E>::names[i];
}

// The names joined by `sep` ("constant|inverse-sqrt").
template <NamedEnum E>
std::string enum_choices(std::string_view sep = "|") {
  std::string out;
  for (const char* n : EnumNames<E>::names) {
    if (!out.empty()) out += sep;
    out += n;
  }
  return out;
}

// The enumerator named `text`; ValueError "unknown loss 'x' (choices: d2l,
// token)" otherwise.
template <NamedEnum E>
E parse_enum(std::string_view text) {
  const auto& names = EnumNames<E>::names;
  for (std::size_t i = 0; i < names.size(); ++i)
    if (text == names[i]) return static_cast<E>(i);
  throw ValueError("unknown " + std::string(EnumNames<E>::what) + " '" + std::string(text) +
                   "' (choices: " + enum_choices<E>(", ") + ")");
}

}  // namespace attn
