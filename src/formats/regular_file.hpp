// Opening a file the user named as a model, a head or its config: only a regular file is read.
// A FIFO would block open() until a writer came (a hang in a C API call holding its lock), a
// device has no size to map, and a directory maps as "No such device".
#pragma once

#include <cerrno>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vkspec/error.hpp"

namespace vkspec {

// An open descriptor of `path`, a regular file, and its size; throws vkspec::Error starting with
// "`path`: " and naming `what` otherwise. The caller closes the descriptor.
inline int open_regular_file(const std::string& path, const std::string& what, uint64_t* size) {
  // O_NONBLOCK: opening a FIFO with no writer returns at once (it is refused below); for a
  // regular file it changes nothing.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error(path + ": cannot open " + what + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw Error(path + ": cannot stat " + what + ": " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + (S_ISDIR(st.st_mode) ? ": is a directory, not a " + what
                                            : ": is not a regular file (a " + what + " is read from a file)"));
  }
  if (size) *size = uint64_t(st.st_size);
  return fd;
}

// The same check for a file then read by a stream.
inline void require_regular_file(const std::string& path, const std::string& what) {
  ::close(open_regular_file(path, what, nullptr));
}

}  // namespace vkspec
