// CPU-only controls of common/simt: the order in which the threads of a block run between two
// barriers, and how many host threads run the blocks of a grid.
//
// Schedules (the order of the CUDA threads of a block within each round, a round being what the
// threads do between two barriers or shuffles):
//   in_order  thread 0, 1, 2, ... (linear index x + y*blockDim.x + z*blockDim.x*blockDim.y)
//   reverse   the last thread first
//   random    a new permutation every round, drawn from (seed, block, round): the same seed gives
//             the same run, whichever host thread runs the block
// A correct kernel gives the same result, bit for bit, under every schedule; a kernel that forgets
// a __syncthreads() gives a wrong one under at least one of them.
//
// Environment, read at each launch while no API call has set a value:
//   SIMT_SCHEDULE=in_order|reverse|random|random:<seed>   (default in_order)
//   SIMT_THREADS=<n>                                      host threads, 1..256 (default: the
//                                                         hardware's concurrency, at most 8)
#pragma once

#include <cstdint>
#include <string_view>

#include "common/simt/runtime/backend.h"

namespace simt {
inline namespace cpu {

enum class Schedule { in_order, reverse, random };

struct ScheduleChoice {
  Schedule schedule = Schedule::in_order;
  std::uint64_t seed = 0;  // used by Schedule::random only
};

// Sets the schedule of every later launch (it overrides SIMT_SCHEDULE). Never throws.
void set_schedule(Schedule s, std::uint64_t seed = 0);
// Forgets set_schedule, so that SIMT_SCHEDULE (or the default, in_order) applies again.
void reset_schedule();
// The schedule the next launch uses. Throws std::invalid_argument when SIMT_SCHEDULE is read and
// holds an unknown value (the message names the accepted values).
ScheduleChoice current_schedule_choice();
Schedule current_schedule();

// "in_order", "reverse", "random".
std::string_view to_string(Schedule s);
// Parses "in_order", "reverse", "random" or "random:<seed>" (seed 0 when none is given). Throws
// std::invalid_argument naming the accepted values otherwise.
ScheduleChoice parse_schedule(std::string_view text);

// Sets how many host threads run the blocks of later launches (overrides SIMT_THREADS). Throws
// std::invalid_argument unless 1 <= n <= 256.
void set_host_threads(unsigned n);
// Forgets set_host_threads, so that SIMT_THREADS (or the default) applies again.
void reset_host_threads();
// The number of host threads the next launch uses. Throws std::invalid_argument when SIMT_THREADS
// is read and is not a number in 1..256.
unsigned host_threads();

}  // namespace cpu
}  // namespace simt
