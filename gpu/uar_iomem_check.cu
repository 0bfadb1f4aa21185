// Can a GPU ring a software NIC's doorbell? NVSHMEM's GPU NIC handler maps each UAR page
// with cudaHostRegister(Portable | Mapped | IoMemory) and stores the doorbell from the GPU;
// CUDA refuses that for ordinary pages. This check asks it of pages that are RAM behind a
// VM_PFNMAP / VM_IO mapping — a udmabuf made from a memfd, a dma-buf system heap buffer —
// and, where it is accepted, whether a GPU store reaches the CPU's view of the page (through
// the same mapping and, for udmabuf, through the memfd). Ordinary anonymous memory is asked
// first, as the control. Device machine only (gpu/run-uar-iomem-check); no PCI BAR, resource
// file or /dev/mem is mapped.
#include <cuda_runtime.h>
#include <fcntl.h>
#include <linux/dma-heap.h>
#include <linux/udmabuf.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace {

__global__ void ring(volatile uint64_t* bf, uint64_t v) {
  *bf = v;
  __threadfence_system();
}

// Registers `page` as I/O memory; if CUDA takes it, a GPU store of `v` and what the CPU sees
// through `cpu` (and `alias`, another mapping of the same page, if any).
void ask(const char* what, void* page, const volatile uint64_t* alias) {
  std::memset(page, 0, 4096);
  const cudaError_t r = cudaHostRegister(page, 4096, cudaHostRegisterPortable | cudaHostRegisterMapped | cudaHostRegisterIoMemory);
  if (r != cudaSuccess) {
    std::printf("%-28s cudaHostRegister(IoMemory): %s\n", what, cudaGetErrorString(r));
    (void)cudaGetLastError();
    return;
  }
  void* dev = nullptr;
  cudaError_t e = cudaHostGetDevicePointer(&dev, page, 0);
  const uint64_t v = 0x0123456789abcdefull;
  if (e == cudaSuccess) {
    ring<<<1, 1>>>(static_cast<volatile uint64_t*>(dev) + 0x800 / 8, v);
    e = cudaDeviceSynchronize();
  }
  const uint64_t seen = static_cast<volatile uint64_t*>(page)[0x800 / 8];
  std::printf("%-28s cudaHostRegister(IoMemory): accepted; GPU store: %s; CPU sees 0x%016llx through the mapping%s",
              what, cudaGetErrorString(e), (unsigned long long)seen, seen == v ? " (the store)" : " (NOT the store)");
  if (alias != nullptr) std::printf(", 0x%016llx through the memfd", (unsigned long long)alias[0x800 / 8]);
  std::printf("\n");
  cudaHostUnregister(page);
}

}  // namespace

int main() {
  if (cudaSetDevice(0) != cudaSuccess) return std::printf("no GPU\n"), 1;
  void* anon = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ask("anonymous page (control)", anon, nullptr);

  // udmabuf: a sealed memfd handed to /dev/udmabuf; its dma-buf mmap is VM_PFNMAP (Linux 6.11+).
  const int memfd = memfd_create("doorbell-uar", MFD_ALLOW_SEALING);
  const int ud = open("/dev/udmabuf", O_RDWR);
  if (ud < 0) {
    std::printf("%-28s /dev/udmabuf: %s\n", "udmabuf page", std::strerror(errno));
  } else if (memfd >= 0 && ftruncate(memfd, 4096) == 0 && fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK) == 0) {
    udmabuf_create c{};
    c.memfd = uint32_t(memfd), c.offset = 0, c.size = 4096;
    const int buf = ioctl(ud, UDMABUF_CREATE, &c);
    void* p = buf >= 0 ? mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0) : MAP_FAILED;
    void* alias = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (p == MAP_FAILED) std::printf("%-28s UDMABUF_CREATE / mmap: %s\n", "udmabuf page", std::strerror(errno));
    else static_cast<volatile char*>(p)[0] = 0, ask("udmabuf page", p, static_cast<const volatile uint64_t*>(alias));
  }

  // The dma-buf system heap: its mmap is remap_pfn_range (VM_IO | VM_PFNMAP).
  const int heap = open("/dev/dma_heap/system", O_RDWR);
  if (heap < 0) {
    std::printf("%-28s /dev/dma_heap/system: %s\n", "dma-buf system heap page", std::strerror(errno));
  } else {
    dma_heap_allocation_data a{};
    a.len = 4096, a.fd_flags = O_RDWR | O_CLOEXEC;
    void* p = ioctl(heap, DMA_HEAP_IOCTL_ALLOC, &a) == 0 ? mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, int(a.fd), 0) : MAP_FAILED;
    if (p == MAP_FAILED) std::printf("%-28s DMA_HEAP_IOCTL_ALLOC / mmap: %s\n", "dma-buf system heap page", std::strerror(errno));
    else ask("dma-buf system heap page", p, nullptr);
  }
  return 0;
}
