// Native file access: mmap (read-only, shared) so weights are paged in on demand, not copied.
#include "file.h"

#include <cerrno>
#include <cstring>
#include <vector>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#if !defined(__EMSCRIPTEN__)
#include <sys/mman.h>
#endif

#include "../common.h"
#include "gguf.h"
#include "hf.h"

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

// llama.cpp's split names end in -DDDDD-of-DDDDD.gguf (part numbers from 1).
static bool split_name(const std::string& path, int* no, int* count) {
  const size_t n = path.size(), tail = std::string("-00001-of-00001.gguf").size();
  if (n < tail) return false;
  const char* t = path.c_str() + n - tail;
  auto digits = [](const char* p) {
    int v = 0;
    for (int i = 0; i < 5; i++) {
      if (p[i] < '0' || p[i] > '9') return -1;
      v = v * 10 + (p[i] - '0');
    }
    return v;
  };
  if (t[0] != '-' || std::strncmp(t + 6, "-of-", 4) != 0 || std::strcmp(t + 15, ".gguf") != 0) return false;
  *no = digits(t + 1);
  *count = digits(t + 10);
  return *no >= 1 && *count >= 1 && *no <= *count;
}

std::shared_ptr<const Blob> map_model_file(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return map_hf_directory(path);  // a Hugging Face checkpoint
  int no, count;
  if (!split_name(path, &no, &count) || count == 1) return map_file(path);
  const std::string stem = path.substr(0, path.size() - std::string("-00001-of-00001.gguf").size());
  auto part = [&](int k) { return stem + gguf_split_suffix(k, count); };
  if (no != 1)
    fail(ErrorCode::Io, path + " is part " + std::to_string(no) + " of " + std::to_string(count) +
                            " of a split model: pass the first, " + part(1));
  std::vector<std::shared_ptr<const Blob>> parts;
  for (int k = 1; k <= count; k++) parts.push_back(map_file(part(k)));
  return std::make_shared<SplitBlob>(std::move(parts));
}

}  // namespace qkv
