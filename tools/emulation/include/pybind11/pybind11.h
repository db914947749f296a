// The slice of pybind11 our generated bindings use (`PYBIND11_MODULE`, `m.def(name, &fn)`), for the CPU
// emulation (tools/emulation): each function is registered with its argument kinds and called through
// a C entry point, so ctypes loads the module and no Python or pybind11 header is compiled (seconds
// per program). Arguments travel as 8-byte slots (integers, pointers as integers, doubles); a C++
// exception becomes the call's error text, raised in Python as RuntimeError, as pybind11 does.
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <exception>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace stitch_emu_bind {

using Invoker = int (*)(void* fn, const uint64_t* slots, uint64_t* result, char* error, int error_bytes);

struct Entry {
  std::string name;
  void* fn;
  Invoker invoke;
  std::string kinds;  // one letter per argument, then one for the result: i integer, d floating, v void
};

inline std::vector<Entry>& registry() {
  static std::vector<Entry> entries;
  return entries;
}

template <class T>
constexpr char kind() {
  return std::is_void_v<T> ? 'v' : (std::is_floating_point_v<T> ? 'd' : 'i');
}

template <class T>
T from_slot(uint64_t slot) {
  if constexpr (std::is_floating_point_v<T>) {
    double d;
    memcpy(&d, &slot, 8);
    return static_cast<T>(d);
  } else {
    return static_cast<T>(static_cast<int64_t>(slot));
  }
}

template <class T>
uint64_t to_slot(T value) {
  if constexpr (std::is_floating_point_v<T>) {
    const double d = static_cast<double>(value);
    uint64_t slot;
    memcpy(&slot, &d, 8);
    return slot;
  } else {
    return static_cast<uint64_t>(static_cast<int64_t>(value));
  }
}

template <class R, class... A, size_t... I>
void call(R (*fn)(A...), const uint64_t* slots, uint64_t* result, std::index_sequence<I...>) {
  if constexpr (std::is_void_v<R>) {
    fn(from_slot<A>(slots[I])...);
  } else {
    *result = to_slot(fn(from_slot<A>(slots[I])...));
  }
}

template <class R, class... A>
int invoke(void* fn, const uint64_t* slots, uint64_t* result, char* error, int error_bytes) {
  try {
    call(reinterpret_cast<R (*)(A...)>(fn), slots, result, std::index_sequence_for<A...>{});
    return 0;
  } catch (const std::exception& e) {
    snprintf(error, (size_t)error_bytes, "%s", e.what());
  } catch (...) {
    snprintf(error, (size_t)error_bytes, "unknown C++ exception");
  }
  return 1;
}

struct module_ {
  template <class R, class... A>
  module_& def(const char* name, R (*fn)(A...)) {
    registry().push_back(Entry{name, reinterpret_cast<void*>(fn), &invoke<R, A...>, std::string{kind<A>()..., kind<R>()}});
    return *this;
  }
};

}  // namespace stitch_emu_bind

extern "C" int stitch_emu_count() { return (int)stitch_emu_bind::registry().size(); }
extern "C" const char* stitch_emu_name(int i) { return stitch_emu_bind::registry()[i].name.c_str(); }
extern "C" const char* stitch_emu_kinds(int i) { return stitch_emu_bind::registry()[i].kinds.c_str(); }
extern "C" int stitch_emu_call(int i, const uint64_t* slots, uint64_t* result, char* error, int error_bytes) {
  const stitch_emu_bind::Entry& e = stitch_emu_bind::registry()[i];
  return e.invoke(e.fn, slots, result, error, error_bytes);
}

#define PYBIND11_MODULE(name, m)                                                \
  static void stitch_emu_bind_init(stitch_emu_bind::module_& m);                \
  static const bool stitch_emu_bind_done = [] {                                 \
    stitch_emu_bind::module_ module;                                            \
    stitch_emu_bind_init(module);                                               \
    return true;                                                                \
  }();                                                                          \
  static void stitch_emu_bind_init(stitch_emu_bind::module_& m)
