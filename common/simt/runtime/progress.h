// A progress line for long runs on the CPU: while a ShowProgress lives, every simt::launch prints
//   "  FlashAttention-2: 1234 / 5000 blocks"
// in place (a carriage return, no new line) about twice a second, and clears it when the launch
// ends. Only where standard output is a terminal (and TERM is not "dumb"): piped into a file the
// output stays exactly as without it. CPU path only; a GPU launch prints nothing.
//
//   simt::ShowProgress progress("FlashAttention-2", long_run);   // the demo decides when a run is long
//   ch05::flash_attention_2(...);
//   progress.stop();
#pragma once

#include <string>

namespace simt {

class ShowProgress {
 public:
  // Starts showing progress under `label` when `show` (and standard output is a terminal). Only one
  // may show at a time; a second one replaces the first's label. Never throws.
  explicit ShowProgress(std::string label, bool show = true);
  // Stops showing it (the destructor does too). Never throws.
  void stop();
  ~ShowProgress() { stop(); }
  ShowProgress(const ShowProgress&) = delete;
  ShowProgress& operator=(const ShowProgress&) = delete;

 private:
  bool showing_ = false;  // this one set the label
};

}  // namespace simt
