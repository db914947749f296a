// StitchCUDA's CPU emulation of the CUDA runtime subset our generated kernels use (tools/emulation).
//
// A kernel launch runs its blocks one after another; a block's threads are fibers on one OS
// thread, switched only at __syncthreads, __syncwarp and the warp shuffles, so a run is deterministic.
// `__shared__` is a function-local static (blocks never overlap), dynamic shared memory one buffer.
// A launch is checked as the GPU checks it (block size, grid limits, dynamic shared memory against its
// opt-in) and a barrier that not every live thread of the block (or warp) reaches is reported as a
// deadlock: the launch then fails with cudaErrorLaunchFailure, as a hung kernel would be killed.
// Device memory is host memory: pointers are the CPU tensors' data.
#pragma once

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __shared__ static
#define __constant__ static
#define __align__(n) alignas(n)
#define __CUDACC__EMULATED 1

// ---- vector types --------------------------------------------------------------------------------
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
  unsigned x, y, z;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct float3 {
  float x, y, z;
};
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) int4 {
  int x, y, z, w;
};
struct alignas(8) int2 {
  int x, y;
};
struct alignas(16) double2 {
  double x, y;
};
struct alignas(4) uchar4 {
  unsigned char x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
inline float3 make_float3(float x, float y, float z) { return float3{x, y, z}; }
inline float2 make_float2(float x, float y) { return float2{x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
inline int2 make_int2(int x, int y) { return int2{x, y}; }
inline double2 make_double2(double x, double y) { return double2{x, y}; }

// ---- runtime types -------------------------------------------------------------------------------
enum cudaError_t : int {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDeviceFunction = 98,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorLaunchFailure = 719,
  cudaErrorNotSupported = 801,
};
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
typedef struct CUmemPoolHandle_st* cudaMemPool_t;
enum cudaDeviceAttr : int {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrMaxSharedMemoryPerBlock = 8,
  cudaDevAttrWarpSize = 10,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrL2CacheSize = 38,
  cudaDevAttrMaxThreadsPerMultiProcessor = 39,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};
enum cudaFuncAttribute : int { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaMemcpyKind : int {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
enum cudaStreamCaptureStatus : int { cudaStreamCaptureStatusNone = 0, cudaStreamCaptureStatusActive = 1 };
enum cudaMemPoolAttr : int { cudaMemPoolAttrReleaseThreshold = 4 };
struct cudaDeviceProp {
  char name[256];
  int multiProcessorCount;
  size_t sharedMemPerBlock;
  size_t sharedMemPerBlockOptin;
  size_t sharedMemPerMultiprocessor;
  int l2CacheSize;
  int maxThreadsPerBlock;
  int warpSize;
  int major, minor;
};

// ---- the emulator ----------------------------------------------------------------------------------
namespace stitch_emu {

constexpr size_t kStackBytes = 256 * 1024;
constexpr size_t kDefaultDynamicSmem = 48 * 1024;
constexpr size_t kMaxDynamicSmem = 227 * 1024;

enum State { kRunnable, kAtBlockBarrier, kAtWarpBarrier, kDone };

// Context switches: on x86-64 a few instructions (callee-saved registers and the stack pointer);
// elsewhere ucontext, whose swapcontext also saves the signal mask (a system call per switch).
#if defined(__x86_64__)
extern "C" void stitch_emu_switch(void** save_sp, void* load_sp);
__asm__(
    ".text\n.p2align 4\n.globl stitch_emu_switch\n.hidden stitch_emu_switch\n"
    ".type stitch_emu_switch,@function\nstitch_emu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n  ret\n"
    ".size stitch_emu_switch, .-stitch_emu_switch\n");
struct Context {
  void* sp = nullptr;
};
inline void switch_to(Context* save, Context* load) { stitch_emu_switch(&save->sp, load->sp); }
inline void start_context(Context* c, char* stack, size_t bytes, void (*entry)()) {
  uintptr_t top = (reinterpret_cast<uintptr_t>(stack) + bytes) & ~uintptr_t(15);
  void** frame = reinterpret_cast<void**>(top);
  frame[-1] = nullptr;                             // the entry's (never used) return address
  frame[-2] = reinterpret_cast<void*>(entry);      // where the first switch's `ret` goes
  for (int r = 3; r <= 8; ++r) frame[-r] = nullptr;  // the six callee-saved registers it pops
  c->sp = frame - 8;
}
#else
struct Context {
  ucontext_t uc;
};
inline void switch_to(Context* save, Context* load) { swapcontext(&save->uc, &load->uc); }
inline void start_context(Context* c, char* stack, size_t bytes, void (*entry)()) {
  getcontext(&c->uc);
  c->uc.uc_stack.ss_sp = stack;
  c->uc.uc_stack.ss_size = bytes;
  c->uc.uc_link = nullptr;
  makecontext(&c->uc, entry, 0);
}
#endif

struct Fiber {
  Context ctx;
  char* stack = nullptr;
  uint3 tid{0, 0, 0};
  int linear = 0;
  State state = kRunnable;
};

struct Block {
  std::vector<Fiber> fibers;
  Context scheduler;
  int current = 0;
  bool deadlock = false;
  void (*body)(void*) = nullptr;
  void* body_arg = nullptr;
  uint64_t exchange[64][32];  // warp shuffles: each lane's value, per warp
  int votes = 0;  // __syncthreads_count: the block's true predicates of the current barrier
};

inline Block& block() {
  static Block b;
  return b;
}
inline cudaError_t& last_error() {
  static cudaError_t e = cudaSuccess;
  return e;
}
inline std::vector<unsigned char>& dynamic_buffer() {
  static std::vector<unsigned char> buffer;
  return buffer;
}
inline void* dynamic_smem() { return dynamic_buffer().data(); }
inline std::map<const void*, size_t>& smem_optin() {
  static std::map<const void*, size_t> limits;
  return limits;
}
inline int env_int(const char* name, int fallback) {
  const char* v = getenv(name);
  return v != nullptr && atoi(v) > 0 ? atoi(v) : fallback;
}
// Few SMs by default: the launch heuristics then split small test shapes as they split large ones.
inline int sm_count() { return env_int("STITCH_EMU_SMS", 4); }

}  // namespace stitch_emu

// The block, grid and thread coordinates the running fiber sees.
inline uint3 threadIdx;
inline uint3 blockIdx;
inline dim3 blockDim;
inline dim3 gridDim;
constexpr int warpSize = 32;

namespace stitch_emu {

inline void fiber_entry() {
  Block& b = block();
  b.body(b.body_arg);
  b.fibers[b.current].state = kDone;
  switch_to(&b.fibers[b.current].ctx, &b.scheduler);
}

inline void yield_as(State s) {
  Block& b = block();
  Fiber& f = b.fibers[b.current];
  f.state = s;
  switch_to(&f.ctx, &b.scheduler);
}

inline int warp_of(int linear) { return linear >> 5; }

// Releases the barriers every live thread has reached; false when none can be released (a deadlock,
// unless every fiber is done).
inline bool release_barriers() {
  Block& b = block();
  bool live = false, all_block = true;
  for (const Fiber& f : b.fibers) {
    if (f.state == kDone) continue;
    live = true;
    if (f.state != kAtBlockBarrier) all_block = false;
  }
  if (!live) return true;
  if (all_block) {
    for (Fiber& f : b.fibers)
      if (f.state == kAtBlockBarrier) f.state = kRunnable;
    return true;
  }
  bool released = false;
  const int warps = ((int)b.fibers.size() + 31) / 32;
  for (int w = 0; w < warps; ++w) {
    bool any = false, all = true;
    for (int l = w * 32; l < std::min((int)b.fibers.size(), w * 32 + 32); ++l) {
      const State s = b.fibers[l].state;
      if (s == kDone) continue;
      if (s == kAtWarpBarrier) any = true; else all = false;
    }
    if (any && all) {
      for (int l = w * 32; l < std::min((int)b.fibers.size(), w * 32 + 32); ++l)
        if (b.fibers[l].state == kAtWarpBarrier) b.fibers[l].state = kRunnable;
      released = true;
    }
  }
  return released;
}

// Runs one block's threads to completion; false on a barrier deadlock.
inline bool run_block(int threads, void (*body)(void*), void* arg) {
  Block& b = block();
  if ((int)b.fibers.size() != threads) {
    for (Fiber& f : b.fibers) free(f.stack);
    b.fibers.assign(threads, Fiber{});
    for (Fiber& f : b.fibers) f.stack = static_cast<char*>(malloc(kStackBytes));
  }
  b.body = body;
  b.body_arg = arg;
  b.deadlock = false;
  b.votes = 0;  // a block that deadlocked mid-vote leaves nothing behind
  for (int i = 0; i < threads; ++i) {
    Fiber& f = b.fibers[i];
    f.linear = i;
    f.tid = uint3{(unsigned)(i % blockDim.x), (unsigned)((i / blockDim.x) % blockDim.y),
                  (unsigned)(i / (blockDim.x * blockDim.y))};
    f.state = kRunnable;
    start_context(&f.ctx, f.stack, kStackBytes, fiber_entry);
  }
  while (true) {
    bool ran = false;
    for (int i = 0; i < threads; ++i) {
      if (b.fibers[i].state != kRunnable) continue;
      b.current = i;
      threadIdx = b.fibers[i].tid;
      switch_to(&b.scheduler, &b.fibers[i].ctx);
      ran = true;
    }
    bool done = true;
    for (const Fiber& f : b.fibers) done = done && f.state == kDone;
    if (done) return true;
    if (!release_barriers() && !ran) {
      fprintf(stderr, "stitch_emu: barrier deadlock in block (%u, %u, %u)\n", blockIdx.x, blockIdx.y, blockIdx.z);
      return false;
    }
  }
}

template <class Fn>
inline void call_body(void* p) {
  (*static_cast<Fn*>(p))();
}

// A launch as the GPU would check and run it. The kernel's parameters are converted once, then each
// thread gets its own copy (a kernel may modify its by-value parameters).
template <class... P, class... A>
inline void launch(void (*kernel)(P...), dim3 grid, dim3 blk, size_t smem, cudaStream_t, A&&... args) {
  const unsigned long long threads = (unsigned long long)blk.x * blk.y * blk.z;
  if (threads == 0 || threads > 1024 || blk.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 ||
      grid.z > 65535 || grid.x > 2147483647u) {
    fprintf(stderr, "stitch_emu: invalid launch grid (%u, %u, %u) block (%u, %u, %u)\n", grid.x, grid.y, grid.z, blk.x,
            blk.y, blk.z);
    last_error() = cudaErrorInvalidConfiguration;
    return;
  }
  size_t limit = kDefaultDynamicSmem;
  auto found = smem_optin().find(reinterpret_cast<const void*>(kernel));
  if (found != smem_optin().end()) limit = found->second;
  if (smem > limit) {
    fprintf(stderr, "stitch_emu: %zu bytes of dynamic shared memory above the kernel's limit of %zu\n", smem, limit);
    last_error() = cudaErrorInvalidValue;
    return;
  }
  const std::tuple<std::decay_t<P>...> params(static_cast<std::decay_t<P>>(args)...);
  dynamic_buffer().assign(smem + 16, 0xFF);
  auto body = [&]() {
    std::tuple<std::decay_t<P>...> mine = params;
    std::apply(kernel, mine);
  };
  blockDim = blk;
  gridDim = grid;
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        blockIdx = uint3{x, y, z};
        if (!run_block((int)threads, call_body<decltype(body)>, &body)) {
          last_error() = cudaErrorLaunchFailure;
          return;
        }
      }
    }
  }
}

// Every live lane of the calling warp publishes `v`; returns lane `src`'s value (own when src < 0).
template <class T>
inline T exchange(T v, int src) {
  static_assert(sizeof(T) <= 8, "shuffles move at most 8 bytes");
  Block& b = block();
  const int linear = b.fibers[b.current].linear;
  const int warp = warp_of(linear), lane = linear & 31;
  uint64_t slot = 0;
  memcpy(&slot, &v, sizeof(T));
  b.exchange[warp][lane] = slot;
  yield_as(kAtWarpBarrier);
  T out = v;
  const int lanes = std::min(32, (int)b.fibers.size() - warp * 32);
  if (src >= 0 && src < lanes && b.fibers[warp * 32 + src].state != kDone) {
    memcpy(&out, &b.exchange[warp][src], sizeof(T));
  }
  yield_as(kAtWarpBarrier);  // nobody overwrites a slot before every lane has read
  return out;
}

}  // namespace stitch_emu

// ---- intrinsics ------------------------------------------------------------------------------------
inline void __syncthreads() { stitch_emu::yield_as(stitch_emu::kAtBlockBarrier); }
// The block-wide votes: every live thread adds its predicate, then reads the count after a barrier; the
// count is cleared between two more barriers, so no thread's next vote lands before every thread has read.
inline int __syncthreads_count(int predicate) {
  stitch_emu::Block& b = stitch_emu::block();
  if (predicate) ++b.votes;
  stitch_emu::yield_as(stitch_emu::kAtBlockBarrier);
  const int count = b.votes;
  stitch_emu::yield_as(stitch_emu::kAtBlockBarrier);
  b.votes = 0;
  stitch_emu::yield_as(stitch_emu::kAtBlockBarrier);
  return count;
}
inline int __syncthreads_or(int predicate) { return __syncthreads_count(predicate) != 0; }
inline int __syncthreads_and(int predicate) { return __syncthreads_count(!predicate) == 0; }
inline void __syncwarp(unsigned = 0xffffffffu) { stitch_emu::yield_as(stitch_emu::kAtWarpBarrier); }
inline void __threadfence() {}
inline void __threadfence_block() {}

inline int stitch_emu_lane() { return stitch_emu::block().fibers[stitch_emu::block().current].linear & 31; }

template <class T>
inline T __shfl_sync(unsigned, T v, int src, int width = 32) {
  const int lane = stitch_emu_lane();
  return stitch_emu::exchange(v, (lane / width) * width + (src % width));
}
template <class T>
inline T __shfl_xor_sync(unsigned, T v, int mask, int width = 32) {
  const int lane = stitch_emu_lane();
  const int src = lane ^ mask;
  return stitch_emu::exchange(v, src / width == lane / width ? src : -1);
}
template <class T>
inline T __shfl_up_sync(unsigned, T v, unsigned delta, int width = 32) {
  const int lane = stitch_emu_lane();
  const int src = lane - (int)delta;
  return stitch_emu::exchange(v, src >= (lane / width) * width ? src : -1);
}
template <class T>
inline T __shfl_down_sync(unsigned, T v, unsigned delta, int width = 32) {
  const int lane = stitch_emu_lane();
  const int src = lane + (int)delta;
  return stitch_emu::exchange(v, src < (lane / width + 1) * width ? src : -1);
}
inline unsigned __ballot_sync(unsigned, int predicate) {
  const int lane = stitch_emu_lane();
  unsigned bits = 0;
  for (int l = 0; l < 32; ++l) {
    const int mine = stitch_emu::exchange(predicate ? 1 : 0, l);
    if (mine) bits |= 1u << l;
  }
  (void)lane;
  return bits;
}
inline int __any_sync(unsigned m, int p) { return __ballot_sync(m, p) != 0; }
inline int __all_sync(unsigned m, int p) {
  const unsigned b = __ballot_sync(m, p), live = __ballot_sync(m, 1);
  return b == live;
}
inline unsigned __activemask() { return 0xffffffffu; }

// Blocks never overlap and a fiber switches only at barriers, so read-modify-write is already atomic.
template <class T>
inline T atomicAdd(T* p, T v) {
  const T old = *p;
  *p = old + v;
  return old;
}
template <class T>
inline T atomicExch(T* p, T v) {
  const T old = *p;
  *p = v;
  return old;
}
template <class T>
inline T atomicMax(T* p, T v) {
  const T old = *p;
  if (v > old) *p = v;
  return old;
}
template <class T>
inline T atomicMin(T* p, T v) {
  const T old = *p;
  if (v < old) *p = v;
  return old;
}
template <class T>
inline T atomicCAS(T* p, T compare, T v) {
  const T old = *p;
  if (old == compare) *p = v;
  return old;
}

template <class T>
inline T __ldg(const T* p) {
  return *p;
}
inline float __uint_as_float(unsigned u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  memcpy(&u, &f, 4);
  return u;
}
inline float __int_as_float(int i) {
  float f;
  memcpy(&f, &i, 4);
  return f;
}
inline int __float_as_int(float f) {
  int i;
  memcpy(&i, &f, 4);
  return i;
}
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanhf(float x) { return tanhf(x); }
inline float __powf(float a, float b) { return powf(a, b); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }
inline float rsqrtf(float x) { return 1.f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }

// CUDA's overloaded min/max on mixed argument types.
template <class A, class B>
inline std::common_type_t<A, B> min(A a, B b) {
  return b < a ? b : a;
}
template <class A, class B>
inline std::common_type_t<A, B> max(A a, B b) {
  return a < b ? b : a;
}

// ---- runtime API -----------------------------------------------------------------------------------
inline cudaError_t cudaGetLastError() {
  const cudaError_t e = stitch_emu::last_error();
  stitch_emu::last_error() = cudaSuccess;
  return e;
}
inline cudaError_t cudaPeekAtLastError() { return stitch_emu::last_error(); }
inline const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error (emulated)";
    case cudaErrorInvalidValue: return "invalid argument (emulated)";
    case cudaErrorMemoryAllocation: return "out of memory (emulated)";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument (emulated)";
    case cudaErrorLaunchFailure: return "unspecified launch failure: barrier deadlock (emulated)";
    default: return "error (emulated)";
  }
}
inline const char* cudaGetErrorName(cudaError_t e) { return cudaGetErrorString(e); }
inline cudaError_t cudaGetDevice(int* d) {
  *d = 0;
  return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
inline cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int) {
  switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = stitch_emu::sm_count(); break;
    case cudaDevAttrL2CacheSize: *value = 50 << 20; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)stitch_emu::kMaxDynamicSmem; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = 228 * 1024; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = 48 * 1024; break;
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = 2048; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
    default: return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  memset(p, 0, sizeof(*p));
  snprintf(p->name, sizeof(p->name), "StitchCUDA CPU emulation");
  p->multiProcessorCount = stitch_emu::sm_count();
  p->sharedMemPerBlock = 48 * 1024;
  p->sharedMemPerBlockOptin = stitch_emu::kMaxDynamicSmem;
  p->sharedMemPerMultiprocessor = 228 * 1024;
  p->l2CacheSize = 50 << 20;
  p->maxThreadsPerBlock = 1024;
  p->warpSize = 32;
  p->major = 9;
  return cudaSuccess;
}
template <class F>
inline cudaError_t cudaFuncSetAttribute(F* kernel, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
      (size_t)value > stitch_emu::kMaxDynamicSmem)
    return cudaErrorInvalidValue;
  stitch_emu::smem_optin()[reinterpret_cast<const void*>(kernel)] = (size_t)value;
  return cudaSuccess;
}
// An SM's 2048 threads, at most 32 blocks (registers and shared memory are not modelled).
template <class F>
inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, F*, int threads, size_t) {
  if (threads < 1 || threads > 1024) return cudaErrorInvalidValue;
  *blocks = 2048 / threads < 32 ? 2048 / threads : 32;
  return cudaSuccess;
}
inline cudaError_t cudaMalloc(void** p, size_t n) {
  *p = malloc(n == 0 ? 1 : n);
  return *p != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
template <class T>
inline cudaError_t cudaMalloc(T** p, size_t n) {
  return cudaMalloc(reinterpret_cast<void**>(p), n);
}
inline cudaError_t cudaFree(void* p) {
  free(p);
  return cudaSuccess;
}
inline cudaError_t cudaMallocAsync(void** p, size_t n, cudaStream_t) { return cudaMalloc(p, n); }
template <class T>
inline cudaError_t cudaMallocAsync(T** p, size_t n, cudaStream_t s) {
  return cudaMallocAsync(reinterpret_cast<void**>(p), n, s);
}
inline cudaError_t cudaFreeAsync(void* p, cudaStream_t) { return cudaFree(p); }
inline cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t = nullptr) {
  memset(p, v, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemset(void* p, int v, size_t n) { return cudaMemsetAsync(p, v, n); }
inline cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind, cudaStream_t = nullptr) {
  memmove(d, s, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind k) { return cudaMemcpyAsync(d, s, n, k); }
inline cudaError_t cudaMemcpy2DAsync(void* d, size_t dpitch, const void* s, size_t spitch, size_t width, size_t height,
                                     cudaMemcpyKind, cudaStream_t = nullptr) {
  if (width > dpitch || width > spitch) return cudaErrorInvalidValue;  // as the runtime: a row wider than a pitch
  for (size_t r = 0; r < height; ++r)
    memmove(static_cast<char*>(d) + r * dpitch, static_cast<const char*>(s) + r * spitch, width);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy2D(void* d, size_t dpitch, const void* s, size_t spitch, size_t width, size_t height,
                                cudaMemcpyKind k) {
  return cudaMemcpy2DAsync(d, dpitch, s, spitch, width, height, k);
}
inline cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
  *free_bytes = (size_t)8 << 30;
  *total = (size_t)16 << 30;
  return cudaSuccess;
}
inline cudaError_t cudaStreamIsCapturing(cudaStream_t, cudaStreamCaptureStatus* s) {
  *s = cudaStreamCaptureStatusNone;
  return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int) {
  *pool = nullptr;
  return cudaSuccess;
}
inline cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t, cudaMemPoolAttr, void*) { return cudaSuccess; }
inline cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = nullptr;
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t = nullptr) { return cudaSuccess; }
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) {
  *ms = 0.f;
  return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }
