// SIMT_TSAN_ACQUIRE(address), SIMT_TSAN_RELEASE(address): ThreadSanitizer's acquire and release on
// an address, for simt's runtime files that order CUDA threads themselves (block.cpp's barriers,
// hopper.cpp's mbarriers): what a thread did before a release is seen by a thread after the acquire.
// Nothing outside a ThreadSanitizer build (or one with SIMT_TSAN_ANNOTATIONS=1: the files compiled
// without TSan's instrumentation, common/simt/CMakeLists.txt).
// Source: compiler-rt, sanitizer/tsan_interface.h (__tsan_acquire, __tsan_release).
#pragma once

#if defined(__SANITIZE_THREAD__) || SIMT_TSAN_ANNOTATIONS
#include <sanitizer/tsan_interface.h>
#define SIMT_TSAN_ACQUIRE(address) __tsan_acquire(address)
#define SIMT_TSAN_RELEASE(address) __tsan_release(address)
#else
#define SIMT_TSAN_ACQUIRE(address) ((void)(address))
#define SIMT_TSAN_RELEASE(address) ((void)(address))
#endif
