// The MPI bootstrap: MPI_COMM_WORLD of processes launched by mpirun (Open MPI from Debian's
// packages). Built only where CMake finds MPI; elsewhere mpi() says so.
#include "host/bootstrap/bootstrap.h"

#ifdef DOORBELL_HAVE_MPI
#include <mpi.h>
#endif

namespace doorbell::bootstrap {

#ifdef DOORBELL_HAVE_MPI
namespace {

std::string mpi_error(const char* call, int rc) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return std::string("bootstrap: ") + call + ": " + std::string(msg, size_t(len));
}

// MPI counts are ints.
Status fits_int(size_t bytes) {
  if (bytes <= size_t(INT32_MAX)) return {};
  return Status(Errc::kBadParam, "bootstrap: an MPI exchange or message of more than 2 GiB");
}

Status called(const char* call, int rc) { return rc == MPI_SUCCESS ? Status{} : Status(Errc::kInternal, mpi_error(call, rc)); }

constexpr int kTag = 0xdb;  // the messages' tag (the collectives never match a send)

class Mpi final : public Bootstrap {
 public:
  Mpi(uint32_t rank, uint32_t size, bool owner) : rank_(rank), size_(size), owner_(owner) {}
  ~Mpi() override {
    int done = 0;
    if (owner_ && MPI_Finalized(&done) == MPI_SUCCESS && !done) MPI_Finalize();
  }
  uint32_t rank() const override { return rank_; }
  uint32_t size() const override { return size_; }
  const char* name() const override { return "mpi"; }
  Status allgather(void* buf, size_t bytes) override {
    if (Status s = fits_int(bytes); !s) return s;
    return called("MPI_Allgather", MPI_Allgather(MPI_IN_PLACE, 0, MPI_BYTE, buf, int(bytes), MPI_BYTE, MPI_COMM_WORLD));
  }
  Status barrier() override { return called("MPI_Barrier", MPI_Barrier(MPI_COMM_WORLD)); }

 private:
  Status send_bytes(uint32_t peer, const void* buf, size_t bytes) override {
    if (Status s = fits_int(bytes); !s) return s;
    return called("MPI_Send", MPI_Send(buf, int(bytes), MPI_BYTE, int(peer), kTag, MPI_COMM_WORLD));
  }
  // Matched first (MPI_Mprobe), so a message of another size is taken whole and reported.
  Result<uint64_t> recv_bytes(uint32_t peer, void* buf, size_t bytes) override {
    if (Status s = fits_int(bytes); !s) return s;
    MPI_Message msg;
    MPI_Status st;
    if (Status s = called("MPI_Mprobe", MPI_Mprobe(int(peer), kTag, MPI_COMM_WORLD, &msg, &st)); !s) return s;
    int count = 0;
    if (Status s = called("MPI_Get_count", MPI_Get_count(&st, MPI_BYTE, &count)); !s) return s;
    std::vector<uint8_t> drop(size_t(count) == bytes ? 0 : size_t(count));
    void* into = size_t(count) == bytes ? buf : drop.data();
    if (Status s = called("MPI_Mrecv", MPI_Mrecv(into, count, MPI_BYTE, &msg, MPI_STATUS_IGNORE)); !s) return s;
    return uint64_t(count);
  }

  uint32_t rank_, size_;
  bool owner_;  // this object initialised MPI, so it finalises it
};

}  // namespace

Result<std::unique_ptr<Bootstrap>> mpi() {
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
    if (Status s = called("MPI_Init_thread", MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided)); !s) return s;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);  // errors come back as Status
  }
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<Bootstrap>(std::make_unique<Mpi>(uint32_t(rank), uint32_t(size), !inited));
}
#else
Result<std::unique_ptr<Bootstrap>> mpi() {
  return Status(Errc::kNotSupported, "bootstrap: this build has no MPI (install libopenmpi-dev and reconfigure)");
}
#endif

}  // namespace doorbell::bootstrap
