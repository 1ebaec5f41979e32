// Integer helpers of the host planners, and the lookups every family's instantiation table uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <tuple>
#include <utility>

namespace mconv::detail {

constexpr int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
constexpr int64_t round_up(int64_t a, int64_t b) {
  return (a + b - 1) / b * b;
}

/// Index of the entry of `catalog` whose name() is `name`, or -1.
template <class Catalog>
int find_by_name(const Catalog& catalog, std::string_view name) {
  for (size_t i = 0; i < catalog.size(); ++i)
    if (catalog[i].name() == name) return static_cast<int>(i);
  return -1;
}

/// Calls f(T{}) for the type at `index` of the std::tuple `Types`; false when there is none. The
/// families' launchers dispatch on their tables with it.
template <class Types, class F, size_t... I>
bool visit_type_at(int index, F&& f, std::index_sequence<I...>) {
  return ((index == int(I) ? (f(std::tuple_element_t<I, Types>{}), true) : false) || ...);
}
template <class Types, class F>
bool visit_type_at(int index, F&& f) {
  return visit_type_at<Types>(index, f, std::make_index_sequence<std::tuple_size_v<Types>>{});
}

}  // namespace mconv::detail
