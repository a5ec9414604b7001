// The memory target natively: peak RSS <= model bytes + KV cache + 10%. Writes a
// random-weight llama2.c model of about 200 MB to a temp file, maps it, prefills and decodes,
// then compares the process's peak RSS (VmHWM) above its RSS before the model (VmRSS) with the
// file and KV cache sizes. A separate program (ctest: peak_memory) so no other test's
// allocations count. Exit 0 = within the bound.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "common.h"
#include "formats/file.h"
#include "formats/loader.h"
#include "model/transformer.h"

using namespace qkv;

// VmRSS / VmHWM of this process in bytes.
static uint64_t status_kb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.compare(0, strlen(key), key) == 0)
      return std::strtoull(line.c_str() + strlen(key) + 1, nullptr, 10) * 1024;
  return 0;
}

int main() {
  const int dim = 1024, hidden = 2816, layers = 4, heads = 16, vocab = 512, seq = 512;
  char tmpl[] = "/tmp/qkv-peak-XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd < 0) return perror("mkstemp"), 2;
  close(fd);
  const std::string path = tmpl;
  {  // write block by block: the writer itself must not inflate the peak
    std::ofstream out(path, std::ios::binary);
    const int32_t hdr[7] = {dim, hidden, layers, heads, heads, vocab, seq};
    out.write(reinterpret_cast<const char*>(hdr), sizeof hdr);
    uint32_t s = 12345;
    std::vector<float> buf;
    auto put = [&](size_t n, float scale, bool ones) {
      buf.resize(n);
      for (float& v : buf) {
        s ^= s << 13, s ^= s >> 17, s ^= s << 5;
        v = ones ? 1.0f : ((float)(s >> 8) / 16777216.0f - 0.5f) * 2 * scale;
      }
      out.write(reinterpret_cast<const char*>(buf.data()), (std::streamsize)(n * 4));
    };
    put((size_t)vocab * dim, 0.5f, false);
    put((size_t)layers * dim, 0, true);
    for (int m = 0; m < 4; m++)
      for (int l = 0; l < layers; l++) put((size_t)dim * dim, 1.7f / 32, false);
    put((size_t)layers * dim, 0, true);
    for (int m = 0; m < 3; m++)
      for (int l = 0; l < layers; l++) put((size_t)hidden * dim, 1.7f / (m == 1 ? 53 : 32), false);
    put(dim, 0, true);
    if (!out) return fprintf(stderr, "cannot write %s\n", path.c_str()), 2;
  }
  const uint64_t base = status_kb("VmRSS:");
  uint64_t file = 0, kv = 0;
  try {
    auto blob = map_file(path);
    file = blob->size();
    Transformer t(load_model(blob), 0, nullptr);
    std::vector<int> ids;
    for (int i = 0; i < 40; i++) ids.push_back(1 + (i * 37) % (vocab - 1));
    t.forward(ids.data(), (int)ids.size(), 0);
    for (int i = 0; i < 24; i++) {
      int next = 0;
      for (int v = 1; v < vocab; v++)
        if (t.logits()[v] > t.logits()[next]) next = v;
      t.forward(&next, 1, 40 + i);
    }
    kv = t.kv_cache_bytes();
  } catch (const Error& e) {
    fprintf(stderr, "peak_memory: %s\n", e.what());
    unlink(path.c_str());
    return 1;
  }
  unlink(path.c_str());
  const uint64_t peak = status_kb("VmHWM:");
  const double used = (double)(peak - base), bound = 1.10 * (double)(file + kv);
  printf(
      "file %.1f MiB, KV cache %.1f MiB, RSS before %.1f MiB, peak RSS %.1f MiB: %.1f MiB above = %.3f x (file + KV), bound 1.10\n",
      file / 1048576.0, kv / 1048576.0, base / 1048576.0, peak / 1048576.0, used / 1048576.0,
      used / (double)(file + kv));
  if (!(used <= bound) || file < 150000000) {
    fprintf(stderr, "peak_memory: FAILED (%.0f bytes above the start > %.0f)\n", used, bound);
    return 1;
  }
  return 0;
}
