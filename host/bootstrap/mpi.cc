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
    if (bytes > size_t(INT32_MAX)) return Status(Errc::kBadParam, "bootstrap: an MPI exchange of more than 2 GiB per rank");
    const int rc = MPI_Allgather(MPI_IN_PLACE, 0, MPI_BYTE, buf, int(bytes), MPI_BYTE, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? Status{} : Status(Errc::kInternal, mpi_error("MPI_Allgather", rc));
  }
  Status barrier() override {
    const int rc = MPI_Barrier(MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? Status{} : Status(Errc::kInternal, mpi_error("MPI_Barrier", rc));
  }

 private:
  uint32_t rank_, size_;
  bool owner_;  // this object initialised MPI, so it finalises it
};

}  // namespace

Result<std::unique_ptr<Bootstrap>> mpi() {
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
    if (int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided); rc != MPI_SUCCESS)
      return Status(Errc::kInternal, mpi_error("MPI_Init_thread", rc));
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
