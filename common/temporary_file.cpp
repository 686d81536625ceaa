#include "common/temporary_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>

namespace fa {

namespace {

// The live temporary files, for the signal handler: fixed storage, since a handler may only call
// async-signal-safe functions (unlink, sigaction, raise: POSIX, signal-safety(7)) and read memory
// that is already there.
constexpr int kSlots = 16;
constexpr std::size_t kPathBytes = 4096;
char g_paths[kSlots][kPathBytes];
std::atomic<bool> g_live[kSlots];

std::mutex g_mutex;  // guards the slots' allocation and the handlers' installation
int g_live_count = 0;

// The signals that end a process by default while it writes: Ctrl-C, kill, a closed terminal
// (SIGHUP), a closed pipe (SIGPIPE), Ctrl-\ (SIGQUIT). Each one's disposition before ours, and
// whether ours is installed: a signal the process ignores (under `trap '' INT`, or nohup's SIGHUP)
// stays ignored, as its parent asked.
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT};
constexpr int kSignalCount = sizeof(kSignals) / sizeof(kSignals[0]);
struct sigaction g_previous[kSignalCount];
bool g_installed[kSignalCount];

extern "C" void remove_temporaries(int signal_number) {
  for (int k = 0; k < kSlots; ++k) {
    if (g_live[k].load()) unlink(g_paths[k]);
  }
  // Let the signal do what it would have done without us: the previous disposition, raised again.
  for (int s = 0; s < kSignalCount; ++s) {
    if (kSignals[s] == signal_number) sigaction(signal_number, &g_previous[s], nullptr);
  }
  raise(signal_number);
}

void install_handlers() {
  struct sigaction action {};
  action.sa_handler = remove_temporaries;
  sigemptyset(&action.sa_mask);
  for (int s = 0; s < kSignalCount; ++s) {
    sigaction(kSignals[s], nullptr, &g_previous[s]);
    g_installed[s] = g_previous[s].sa_handler != SIG_IGN;
    if (g_installed[s]) sigaction(kSignals[s], &action, nullptr);
  }
}

void restore_handlers() {
  for (int s = 0; s < kSignalCount; ++s) {
    if (g_installed[s]) sigaction(kSignals[s], &g_previous[s], nullptr);
  }
}

int claim_slot(const std::string& path) {
  std::scoped_lock lock(g_mutex);
  if (path.size() >= kPathBytes) return -1;
  for (int k = 0; k < kSlots; ++k) {
    if (g_live[k].load()) continue;
    std::memcpy(g_paths[k], path.c_str(), path.size() + 1);
    g_live[k].store(true);
    if (g_live_count++ == 0) install_handlers();
    return k;
  }
  return -1;
}

void release_slot(int k) {
  if (k < 0) return;
  std::scoped_lock lock(g_mutex);
  g_live[k].store(false);
  if (--g_live_count == 0) restore_handlers();
}

}  // namespace

TemporaryFile::TemporaryFile(const std::string& path) : target_(path), temporary_(path + ".XXXXXX") {
  fd_ = mkstemp(temporary_.data());
  if (fd_ < 0) {
    throw std::runtime_error(
        fmt::format("{}: cannot create a temporary file beside it: {}", path, std::generic_category().message(errno)));
  }
  slot_ = claim_slot(temporary_);
  if (slot_ < 0) {
    close(fd_);
    unlink(temporary_.c_str());
    throw std::runtime_error(fmt::format("{}: too many files are being written at once (at most {})", path, kSlots));
  }
}

TemporaryFile::~TemporaryFile() {
  if (fd_ >= 0) close(fd_);
  if (slot_ >= 0) {
    unlink(temporary_.c_str());
    release_slot(slot_);
  }
}

void TemporaryFile::commit() {
  const int fd = fd_;
  fd_ = -1;
  if (close(fd) != 0) {
    throw std::runtime_error(
        fmt::format("{}: writing failed while closing the file: {}", target_, std::generic_category().message(errno)));
  }
  // mkstemp creates the file readable by its owner only; give it the permissions a new file gets.
  const mode_t mask = umask(0);
  umask(mask);
  chmod(temporary_.c_str(), 0666 & ~mask);
  if (std::rename(temporary_.c_str(), target_.c_str()) != 0) {
    throw std::runtime_error(
        fmt::format("{}: cannot replace the file: {}", target_, std::generic_category().message(errno)));
  }
  release_slot(slot_);
  slot_ = -1;
}

}  // namespace fa
