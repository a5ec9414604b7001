// Native file access: mmap (read-only, shared) so weights are paged in on demand, not copied.
#include "file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#if !defined(__EMSCRIPTEN__)
#include <sys/mman.h>
#endif

#include "../common.h"

namespace qkv {

namespace {
class MappedBlob : public Blob {
 public:
  MappedBlob(void* p, uint64_t n) : p_(p), n_(n) {}
  ~MappedBlob() override {
#if !defined(__EMSCRIPTEN__)
    if (p_ && n_) munmap(p_, n_);
#endif
  }
  const uint8_t* data() const override { return static_cast<const uint8_t*>(p_); }
  uint64_t size() const override { return n_; }

 private:
  void* p_;
  uint64_t n_;
};
}  // namespace

std::shared_ptr<const Blob> map_file(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) fail(ErrorCode::Io, "cannot open " + path + ": " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    fail(ErrorCode::Io, "cannot read " + path + ": not a regular file");
  }
  const uint64_t n = (uint64_t)st.st_size;
  if (n == 0) {
    close(fd);
    return std::make_shared<VectorBlob>(std::vector<uint8_t>());
  }
#if !defined(__EMSCRIPTEN__)
  void* p = mmap(nullptr, n, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) fail(ErrorCode::Io, "cannot map " + path + ": " + std::strerror(errno));
  return std::make_shared<MappedBlob>(p, n);
#else
  std::vector<uint8_t> buf(n);
  uint64_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, buf.data() + got, n - got);
    if (r <= 0) {
      close(fd);
      fail(ErrorCode::Io, "cannot read " + path);
    }
    got += r;
  }
  close(fd);
  return std::make_shared<VectorBlob>(std::move(buf));
#endif
}

}  // namespace qkv
