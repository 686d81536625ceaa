// Which CPU copy of a chapter's kernels a host function runs. A chapter built with
// `add_kernels(<library> <kernels.cuh> PROFILED)` (cmake/Chapters.cmake) holds two: the ordinary
// copy, chNN::cpu, and the profiled copy, chNN::cpu_profiled, whose every load and store calls
// simt's hooks (cmake/SimtProfile.cmake). Its host code picks one per run:
//
//   #if SIMT_PROFILED_KERNELS
//     if (simt::use_profiled_copy()) return cpu_profiled::run_kernel(...);
//   #endif
//     return cpu::run_kernel(...);
#pragma once

namespace simt {

// True while simt's memory profile records (profile.h) or its race checker is on (racecheck.h):
// then the profiled copy must run, since only its accesses are seen. Reads SIMT_RACECHECK the
// first time, and throws std::invalid_argument as racecheck::enabled() does.
bool use_profiled_copy();

}  // namespace simt
