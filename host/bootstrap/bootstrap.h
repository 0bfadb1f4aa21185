// How the processes of one job find each other before any RDMA exists (SPEC §1's "bootstrap
// network"): each knows its rank and the job's size, and they exchange blocks of bytes
// (RC handles, keys, heap bases) all-to-all. Backends: MPI (processes launched by mpirun),
// TCP with a unique id (rank 0's address, handed to the others out of band, as NCCL's
// unique id is: for srun and other launchers without MPI), and one process alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace doorbell::bootstrap {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual uint32_t rank() const = 0;
  virtual uint32_t size() const = 0;
  // In place: `buf` holds size() blocks of `bytes`; this rank's block (rank() * bytes) is
  // its contribution; on return every block holds its rank's.
  virtual Status allgather(void* buf, size_t bytes) = 0;
  virtual Status barrier() = 0;
  virtual const char* name() const = 0;
};

// Blocks of any size: every rank's `mine`, in rank order (two exchanges: sizes, then the
// blocks padded to the largest).
Result<std::vector<std::vector<uint8_t>>> allgatherv(Bootstrap& b, const std::vector<uint8_t>& mine);

// One process, size 1.
std::unique_ptr<Bootstrap> single();

// TCP: `uid` is rank 0's "host:port". Rank 0 listens there and accepts size - 1 ranks; the
// others connect (retrying for `timeout_s`). Every exchange goes through rank 0.
Result<std::unique_ptr<Bootstrap>> tcp(const std::string& uid, uint32_t rank, uint32_t size, double timeout_s = 30);
// A unique id for tcp(): a free port on this host's address (`host`, default: the hostname's).
Result<std::string> tcp_unique_id(const std::string& host = {});

// MPI_COMM_WORLD (MPI_Init if nobody did; MPI_Finalize when the last one goes); kNotSupported
// in a build without MPI.
Result<std::unique_ptr<Bootstrap>> mpi();

// What the environment says: mpirun's (OMPI_COMM_WORLD_SIZE / PMI_SIZE) -> MPI;
// DOORBELL_BOOTSTRAP_UID with DOORBELL_RANK and DOORBELL_NRANKS -> TCP; neither -> single.
Result<std::unique_ptr<Bootstrap>> from_env();

}  // namespace doorbell::bootstrap
