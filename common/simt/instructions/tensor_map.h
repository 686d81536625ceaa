// The tensor map of TMA (cp.async.bulk.tensor, hopper.h): which global tensor, its dimensions and
// strides, the box one copy moves, and how the box is swizzled in shared memory. Host code makes
// it once, with the same call for both backends, and passes it to a kernel by value as a
// `const __grid_constant__ simt::TensorMap` parameter; the kernel hands its address to the copy.
//
//   make_tensor_map<T>(global, dims, strides, box, swizzle, element_strides = all 1) -> TensorMap
//       T: simt::bf16, simt::f16, float, std::uint16_t, std::uint32_t or std::uint8_t.
//       dims[r]: rank r = 1 .. 5 sizes in elements, dims[0] the innermost (contiguous) one.
//       strides[r - 1]: the byte strides of dimensions 1 .. r - 1 (dimension 0's is the element
//       size), each a multiple of 16, below 2^40. box[r]: 1 .. 256 elements per dimension,
//       box[0] * sizeof(T) a multiple of 16. element_strides[r]: 1 .. 8; the box then holds
//       ceil(box[i] / element_strides[i]) elements along dimension i. global: 16-byte aligned.
//       swizzle none, or b32 / b64 / b128 with box[0] * sizeof(T) equal to the span (the CUDA
//       driver allows a narrower box; simt refuses it rather than guess its layout). Elements
//       outside the tensor are copied as zeros; interleave none; L2 promotion none.
//   make_tensor_map_2d<T>(global, width, height, row_stride_elements, box_width, box_height, swizzle)
//       the 2D case: a row-major [height][width] matrix whose rows lie row_stride_elements apart.
//   Throws std::invalid_argument naming the rule a parameter breaks (the same check on both
//   backends, before the GPU's driver sees the parameters).
//
// GPU: TensorMap holds a CUtensorMap (128 bytes, 64-byte aligned) made by the driver's
// cuTensorMapEncodeTiled, found with cudaGetDriverEntryPointByVersion (cudaGetDriverEntryPoint
// before CUDA 12.5), so that nothing links libcuda directly; built with CUDA 11, make_tensor_map
// throws. CPU: simt's own struct with the same fields, read by the emulated copy.
// Source: CUDA Driver API, "Tensor Map Object Management", cuTensorMapEncodeTiled (the
// requirements on each parameter); CUDA C++ Programming Guide, "Tensor Memory Access"; PTX ISA,
// "Tensor Copy Restrictions" (cp.async.bulk.tensor).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/simt/instructions/half_precision.h"
#include "common/simt/runtime/backend.h"

#if defined(__CUDACC__)
#include <cuda.h>  // CUtensorMap and the enums only: the function comes from the driver at run time
#include <cuda_runtime.h>

#include "common/simt/runtime/cuda_check.h"
#endif

namespace simt {

// The parameters of a tiled tensor map, as cuTensorMapEncodeTiled takes them.
struct TensorMapShape {
  unsigned rank = 0;
  unsigned element_bytes = 0;
  std::array<std::uint64_t, 5> dims{};     // elements
  std::array<std::uint64_t, 5> strides{};  // bytes; strides[0] = element_bytes
  std::array<std::uint32_t, 5> box{};      // elements
  std::array<std::uint32_t, 5> element_strides{1, 1, 1, 1, 1};
};

namespace tensor_map_detail {

inline void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("make_tensor_map: " + what);
}

// The driver's rules (cuTensorMapEncodeTiled) and simt's one more (a swizzled box fills its span).
inline TensorMapShape check(const void* global, unsigned element_bytes, std::initializer_list<std::uint64_t> dims,
                            std::initializer_list<std::uint64_t> strides, std::initializer_list<std::uint32_t> box,
                            std::initializer_list<std::uint32_t> element_strides, std::uint32_t swizzle_span) {
  TensorMapShape s;
  s.rank = static_cast<unsigned>(dims.size());
  s.element_bytes = element_bytes;
  require(s.rank >= 1 && s.rank <= 5, "the rank (" + std::to_string(s.rank) + ") must be 1 to 5");
  require(strides.size() + 1 == s.rank, "give " + std::to_string(s.rank - 1) + " strides (dimensions 1 .. rank - 1)");
  require(box.size() == s.rank, "give one box size per dimension");
  require(element_strides.size() == 0 || element_strides.size() == s.rank,
          "give one element stride per dimension, or none");
  require(global != nullptr && reinterpret_cast<std::uintptr_t>(global) % 16 == 0,
          "the global address must be 16-byte aligned");
  std::size_t i = 0;
  for (std::uint64_t d : dims) {
    require(d >= 1 && d <= (std::uint64_t{1} << 32),
            "dims[" + std::to_string(i) + "] = " + std::to_string(d) + " must be 1 .. 2^32");
    s.dims[i++] = d;
  }
  s.strides[0] = element_bytes;
  i = 1;
  for (std::uint64_t st : strides) {
    require(st % 16 == 0 && st < (std::uint64_t{1} << 40), "the stride of dimension " + std::to_string(i) + " (" +
                                                               std::to_string(st) +
                                                               " bytes) must be a multiple of 16 below 2^40");
    s.strides[i++] = st;
  }
  i = 0;
  for (std::uint32_t b : box) {
    require(b >= 1 && b <= 256, "box[" + std::to_string(i) + "] = " + std::to_string(b) + " must be 1 .. 256");
    s.box[i++] = b;
  }
  i = 0;
  for (std::uint32_t e : element_strides) {
    require(e >= 1 && e <= 8, "element_strides[" + std::to_string(i) + "] = " + std::to_string(e) + " must be 1 .. 8");
    s.element_strides[i++] = e;
  }
  const std::uint64_t inner = std::uint64_t{s.box[0]} * element_bytes;
  require(inner % 16 == 0,
          "the box's inner dimension (" + std::to_string(inner) + " bytes) must be a multiple of 16 bytes");
  if (swizzle_span > 16) {
    require(s.element_strides[0] == 1, "a swizzled box takes every element of its inner dimension");
    require(inner == swizzle_span, "a box swizzled in spans of " + std::to_string(swizzle_span) +
                                       " bytes must have an inner dimension of exactly that many bytes (it has " +
                                       std::to_string(inner) + ")");
  }
  return s;
}

template <class T>
constexpr unsigned element_bytes() {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4, "tensor map elements of 1, 2 or 4 bytes");
  return sizeof(T);
}

}  // namespace tensor_map_detail

}  // namespace simt

#if defined(__CUDACC__) && CUDART_VERSION >= 12000

namespace simt {
inline namespace gpu {

struct TensorMap {
  CUtensorMap raw;  // aligned as the driver requires (64 bytes) by its own declaration
};

namespace tensor_map_driver {

template <class T>
CUtensorMapDataType data_type() {
  if constexpr (std::is_same_v<T, bf16>) return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  if constexpr (std::is_same_v<T, f16>) return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  if constexpr (std::is_same_v<T, float>) return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  if constexpr (std::is_same_v<T, std::uint32_t>) return CU_TENSOR_MAP_DATA_TYPE_UINT32;
  if constexpr (std::is_same_v<T, std::uint16_t>) return CU_TENSOR_MAP_DATA_TYPE_UINT16;
  return CU_TENSOR_MAP_DATA_TYPE_UINT8;
}

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

inline EncodeTiled encode_tiled() {
  static const EncodeTiled function = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
    // 12000: the version of the function's signature (CUDA 12.0, where it first appeared).
    SIMT_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found));
#else
    SIMT_CUDA_CHECK(cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &f, cudaEnableDefault, &found));
#endif
    if (found != cudaDriverEntryPointSuccess || f == nullptr) {
      throw std::runtime_error("make_tensor_map: the CUDA driver has no cuTensorMapEncodeTiled (it needs CUDA 12.0+)");
    }
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return function;
}

}  // namespace tensor_map_driver

template <class T>
TensorMap make_tensor_map(const T* global, std::initializer_list<std::uint64_t> dims,
                          std::initializer_list<std::uint64_t> strides, std::initializer_list<std::uint32_t> box,
                          Swizzle swizzle, std::initializer_list<std::uint32_t> element_strides = {}) {
  const TensorMapShape s = simt::tensor_map_detail::check(global, simt::tensor_map_detail::element_bytes<T>(), dims,
                                                          strides, box, element_strides, swizzle_span(swizzle));
  cuuint64_t g_dims[5], g_strides[4];
  cuuint32_t g_box[5], g_elements[5];
  for (unsigned i = 0; i < s.rank; ++i) {
    g_dims[i] = s.dims[i];
    g_box[i] = s.box[i];
    g_elements[i] = s.element_strides[i];
    if (i > 0) g_strides[i - 1] = s.strides[i];
  }
  const CUtensorMapSwizzle mode = swizzle == Swizzle::b32    ? CU_TENSOR_MAP_SWIZZLE_32B
                                  : swizzle == Swizzle::b64  ? CU_TENSOR_MAP_SWIZZLE_64B
                                  : swizzle == Swizzle::b128 ? CU_TENSOR_MAP_SWIZZLE_128B
                                                             : CU_TENSOR_MAP_SWIZZLE_NONE;
  TensorMap map{};
  const CUresult r = tensor_map_driver::encode_tiled()(
      &map.raw, tensor_map_driver::data_type<T>(), s.rank, const_cast<T*>(global), g_dims, g_strides, g_box, g_elements,
      CU_TENSOR_MAP_INTERLEAVE_NONE, mode, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    throw std::runtime_error("make_tensor_map: cuTensorMapEncodeTiled failed with CUresult " + std::to_string(r));
  }
  return map;
}

}  // namespace gpu
}  // namespace simt

#elif defined(__CUDACC__)  // CUDA 11: no tensor maps; the types exist so that the headers compile

namespace simt {
inline namespace gpu {

struct alignas(64) TensorMap {
  unsigned char raw[128];
};

template <class T>
TensorMap make_tensor_map(const T*, std::initializer_list<std::uint64_t>, std::initializer_list<std::uint64_t>,
                          std::initializer_list<std::uint32_t>, Swizzle, std::initializer_list<std::uint32_t> = {}) {
  throw std::runtime_error("make_tensor_map: tensor maps need CUDA 12.0 or newer (this build's runtime is older)");
}

}  // namespace gpu
}  // namespace simt

#else  // the host compiler

namespace simt {
inline namespace cpu {

// simt's own tensor map: the fields the emulated copy reads (hopper.cpp).
struct alignas(64) TensorMap {
  const std::byte* global = nullptr;
  TensorMapShape shape;
  Swizzle swizzle = Swizzle::none;
};

template <class T>
TensorMap make_tensor_map(const T* global, std::initializer_list<std::uint64_t> dims,
                          std::initializer_list<std::uint64_t> strides, std::initializer_list<std::uint32_t> box,
                          Swizzle swizzle, std::initializer_list<std::uint32_t> element_strides = {}) {
  TensorMap map;
  map.shape = tensor_map_detail::check(global, tensor_map_detail::element_bytes<T>(), dims, strides, box,
                                       element_strides, swizzle_span(swizzle));
  map.global = reinterpret_cast<const std::byte*>(global);
  map.swizzle = swizzle;
  return map;
}

}  // namespace cpu
}  // namespace simt

#endif

namespace simt {
#if defined(__CUDACC__)
inline namespace gpu {
#else
inline namespace cpu {
#endif

template <class T>
TensorMap make_tensor_map_2d(const T* global, std::uint64_t width, std::uint64_t height,
                             std::uint64_t row_stride_elements, std::uint32_t box_width, std::uint32_t box_height,
                             Swizzle swizzle) {
  return make_tensor_map(global, {width, height}, {row_stride_elements * sizeof(T)}, {box_width, box_height}, swizzle);
}

}  // namespace gpu or cpu
}  // namespace simt
