// DeviceBuffer<T> on the CPU: "device memory" that is host memory, so that the same host code
// allocates, copies in, launches and copies out on both backends (gpu.h has the GPU one).
//
//   simt::DeviceBuffer<float> q(std::span<const float>(host_q));   // allocate and copy in
//   simt::DeviceBuffer<float> o(n);                                 // uninitialised (poisoned)
//   o.poison();                                                     // poison it again, e.g. between runs
//   simt::launch<kernel>(grid, block, 0, q.data(), o.data(), n);
//   std::vector<float> out = o.to_host();
//
// The memory is one allocation of exactly size() elements, so AddressSanitizer reports a kernel
// that reads or writes past its end. It is registered as device memory with simt's memory profile
// (profile.h) and race checker (racecheck.h), which see a profiled kernel's accesses to it as
// global memory (observer.h). "Uninitialised" memory is filled with 0xff bytes (NaN for float and
// double, and for bf16 and fp16) so that a run never depends on what the allocator left there; the
// race checker reports a kernel's read of it as an uninitialised read, until the host copies in or
// fills the buffer, or a kernel writes it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/simt/runtime/backend.h"
#include "common/simt/runtime/launch_checks.h"
#include "common/simt/tools/detail/observer.h"

namespace simt {
inline namespace cpu {

template <class T>
class DeviceBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "device memory holds trivially copyable values");

 public:
  // `count` elements, filled with 0xff bytes (unwritten). Throws std::bad_alloc if there is no
  // memory.
  explicit DeviceBuffer(std::size_t count) : data_(allocate(count)), size_(count) { poison(); }
  // A copy of `host`.
  explicit DeviceBuffer(std::span<const T> host) : data_(allocate(host.size())), size_(host.size()) {
    copy_from_host(host);
  }
  // Move-only; a moved-from buffer is empty.
  DeviceBuffer(DeviceBuffer&& other) noexcept : data_(std::move(other.data_)), size_(std::exchange(other.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    data_ = std::move(other.data_);
    size_ = std::exchange(other.size_, 0);
    return *this;
  }

  // Throws std::invalid_argument unless host.size() == size().
  void copy_from_host(std::span<const T> host) {
    rules::check_same_size("copy_from_host", size_, host.size());
    std::copy(host.begin(), host.end(), data_.get());
    observer::host_wrote(data_.get(), size_ * sizeof(T), true);
  }
  // Throws std::invalid_argument unless host.size() == size().
  void copy_to_host(std::span<T> host) const {
    rules::check_same_size("copy_to_host", size_, host.size());
    std::copy(data_.get(), data_.get() + size_, host.begin());
  }
  std::vector<T> to_host() const { return std::vector<T>(data_.get(), data_.get() + size_); }
  void fill(const T& value) {
    std::fill(data_.get(), data_.get() + size_, value);
    observer::host_wrote(data_.get(), size_ * sizeof(T), true);
  }
  // Every byte 0xff (NaN for float, double, bf16 and fp16; -1 for integers), as nothing had
  // written it: a kernel that reads it before writing it shows NaN, and simt's race checker
  // reports the read (racecheck.h). The way to hand a kernel an output buffer.
  void poison() {
    std::memset(static_cast<void*>(data_.get()), 0xff, size_ * sizeof(T));
    observer::host_wrote(data_.get(), size_ * sizeof(T), false);
  }

  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  std::size_t size() const { return size_; }

 private:
  // Unregisters the memory from simt's tools before it is freed.
  struct Release {
    void operator()(T* p) const {
      observer::unregister_device_memory(p);
      delete[] p;
    }
  };
  static T* allocate(std::size_t count) {
    T* p = new T[count];
    try {
      observer::register_device_memory(p, count * sizeof(T), sizeof(T));
    } catch (...) {
      delete[] p;
      throw;
    }
    return p;
  }

  std::unique_ptr<T[], Release> data_;
  std::size_t size_ = 0;
};

}  // namespace cpu
}  // namespace simt
