// How the processes of one job find each other before any RDMA exists (SPEC §1's "bootstrap
// network"): each knows its rank and the job's size, and they exchange blocks of bytes
// (RC handles, keys, heap bases) all-to-all, or send each other messages point to point.
// Backends: MPI (processes launched by mpirun), TCP with a unique id (rank 0's address, handed
// to the others out of band, as NCCL's unique id is: for srun and other launchers without
// MPI), ranks forked on one host (fork.h: the GPU programs'), and one process alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
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

  // Point to point, apart from the collectives (a message never meets an exchange): `bytes`
  // to rank `peer`, in order with this rank's other messages to it. A send may wait until the
  // peer receives (MPI_Send's rule: of two ranks sending each other first, only small messages
  // are sure to pass). Each recv takes one send of the same size: another size is kBadState
  // (the message is consumed); `peer` this rank or outside the job is kBadParam.
  Status send(uint32_t peer, const void* buf, size_t bytes) {
    if (Status s = check_peer(peer); !s) return s;
    return send_bytes(peer, buf, bytes);
  }
  Status recv(uint32_t peer, void* buf, size_t bytes) {
    if (Status s = check_peer(peer); !s) return s;
    Result<uint64_t> sent = recv_bytes(peer, buf, bytes);
    if (!sent) return sent.status();
    if (*sent != bytes)
      return Status(Errc::kBadState, "bootstrap: rank " + std::to_string(peer) + " sent " + std::to_string(*sent) + " bytes, rank " +
                                         std::to_string(rank()) + " expected " + std::to_string(bytes) +
                                         " (a send and a receive of different sizes)");
    return {};
  }
  // One value of a plain type (a handle, an id, a number).
  template <class T>
  Status send(uint32_t peer, const T& v) {
    static_assert(std::is_trivially_copyable_v<T> && !std::is_pointer_v<T>, "send the bytes a pointer points at, not the pointer");
    return send(peer, &v, sizeof v);
  }
  template <class T>
  Result<T> recv(uint32_t peer) {
    static_assert(std::is_trivially_copyable_v<T> && !std::is_pointer_v<T>, "receive bytes, not a pointer");
    T v{};
    if (Status s = recv(peer, &v, sizeof v); !s) return s;
    return v;
  }

 private:
  Status check_peer(uint32_t peer) const {
    if (peer < size() && peer != rank()) return {};
    return Status(Errc::kBadParam, "bootstrap: rank " + std::to_string(rank()) + " cannot send to or receive from rank " +
                                       std::to_string(peer) + (peer == rank() ? " (itself)" : " of a job of " + std::to_string(size())));
  }
  // The backend's halves of send / recv, for a peer checked to be another rank of the job.
  // recv_bytes returns the size the peer sent; its bytes are in `buf` only when it is `bytes`.
  virtual Status send_bytes(uint32_t peer, const void* buf, size_t bytes) = 0;
  virtual Result<uint64_t> recv_bytes(uint32_t peer, void* buf, size_t bytes) = 0;
};

// Blocks of any size: every rank's `mine`, in rank order (two exchanges: sizes, then the
// blocks padded to the largest).
Result<std::vector<std::vector<uint8_t>>> allgatherv(Bootstrap& b, const std::vector<uint8_t>& mine);

// One process, size 1.
std::unique_ptr<Bootstrap> single();

// TCP: `uid` is rank 0's "host:port". Rank 0 listens there and accepts size - 1 ranks; the
// others connect (retrying for `timeout_s`). Every exchange goes through rank 0; messages go
// direct, each direction of a pair on its own connection, opened on the pair's first message
// to the address each rank announced in tcp().
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
