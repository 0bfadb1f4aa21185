// Where the shim's Dma comes from: the CUDA plugin beside the shim (built where CUDA is),
// loaded on first use.
#include <dlfcn.h>

#include <string>

#include "host/verbs_shim/model.h"

namespace doorbell::shim {

std::unique_ptr<mock_nic::Dma> make_cuda_dma(int ordinal, std::string* why) {
  Dl_info self{};
  dladdr(reinterpret_cast<void*>(&make_cuda_dma), &self);
  std::string dir = self.dli_fname != nullptr ? self.dli_fname : "";
  dir = dir.substr(0, dir.rfind('/') + 1);
  void* h = dlopen((dir + "libdoorbell_shim_cuda.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return *why = std::string("no CUDA plugin beside the shim (") + dlerror() + ")", nullptr;
  using Make = mock_nic::Dma* (*)(int, char*, size_t);
  auto make = reinterpret_cast<Make>(dlsym(h, "doorbell_shim_make_cuda_dma"));
  char err[256] = {};
  mock_nic::Dma* d = make != nullptr ? make(ordinal, err, sizeof err) : nullptr;
  if (d == nullptr) return *why = std::string("CUDA plugin: ") + (err[0] ? err : "no entry point"), nullptr;
  return std::unique_ptr<mock_nic::Dma>(d);
}

}  // namespace doorbell::shim
