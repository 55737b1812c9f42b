// with_flags(f, flag...): calls f(std::bool_constant<flag>...) for runtime
// flags, one instantiation of f per combination: the one place a kernel's
// compile-time switches (vectorized or not, a dense bias or not, ...) are
// picked from runtime facts, instead of a chain of launches per combination.
// Host code only; torch-free, so both cpp/ and cuda/ use it.
#pragma once

#include <type_traits>

namespace fusedops {

template <typename F>
void with_flags(F&& f) {
  f();
}

template <typename F, typename... Rest>
void with_flags(F&& f, bool flag, Rest... rest) {
  if (flag) {
    with_flags([&](auto... later) { f(std::true_type{}, later...); }, rest...);
  } else {
    with_flags([&](auto... later) { f(std::false_type{}, later...); }, rest...);
  }
}

}  // namespace fusedops
