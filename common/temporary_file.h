// A temporary file beside the file it will replace, so that a file is written whole or not at all:
// the data goes to the temporary file, which is renamed over the real path only once it is
// complete (rename() within one file system replaces a file at once: POSIX, rename(2)).
//
//   fa::TemporaryFile temporary("o.npy");   // o.npy.XXXXXX, created empty, mode 0600
//   ... write(temporary.fd(), ...) ...
//   temporary.commit();                     // renamed over o.npy; nothing is left to remove
//
// A temporary file that is not committed is removed: by the destructor (an exception on the way),
// and also when SIGINT, SIGTERM, SIGHUP, SIGPIPE or SIGQUIT ends the process (Ctrl-C during a long
// write, a closed terminal or pipe): a handler removes every live temporary file, then lets the
// signal end the process as it would have. A signal the process ignores (its parent said so:
// `trap '' INT`, nohup) stays ignored, and the write goes on.
#pragma once

#include <string>

namespace fa {

class TemporaryFile {
 public:
  // Creates `path`.XXXXXX (mkstemp) in path's folder. Throws std::runtime_error naming `path` when
  // it cannot, or when more than 16 temporary files are live at once.
  explicit TemporaryFile(const std::string& path);
  ~TemporaryFile();
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return temporary_; }
  // Closes the file, gives it the permissions a new file gets (umask), and renames it over the
  // real path. Throws std::runtime_error naming the path when closing or renaming fails.
  void commit();

 private:
  std::string target_, temporary_;
  int fd_ = -1;
  int slot_ = -1;  // its entry among the files the signal handler removes
};

}  // namespace fa
