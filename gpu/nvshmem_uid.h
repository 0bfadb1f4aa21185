// Two NVSHMEM PEs started as separate processes by gpu/run-nvshmem-demo meet through NVSHMEM's
// unique-id bootstrap, no MPI: rank 0 writes its id to DEMO_UID_FILE (renamed into place, so
// it is never read half-written), rank 1 waits up to a minute for it. False, with the reason
// on stderr, when NVSHMEM cannot start.
#pragma once

#include <nvshmem.h>
#include <nvshmemx.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

inline bool init_pes_from_uid_file(int rank, const char* uid_file) {
  nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
  if (rank == 0) {
    if (nvshmemx_get_uniqueid(&id) != 0) return std::fprintf(stderr, "nvshmemx_get_uniqueid failed\n"), false;
    std::ofstream(std::string(uid_file) + ".tmp", std::ios::binary).write(reinterpret_cast<char*>(&id), sizeof id);
    std::rename((std::string(uid_file) + ".tmp").c_str(), uid_file);
  } else {
    for (int t = 0; !std::ifstream(uid_file).good(); ++t) {
      if (t > 600) return std::fprintf(stderr, "no unique id from rank 0\n"), false;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::ifstream(uid_file, std::ios::binary).read(reinterpret_cast<char*>(&id), sizeof id);
  }
  nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
  nvshmemx_set_attr_uniqueid_args(rank, 2, &id, &attr);
  if (nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr) != 0) return std::fprintf(stderr, "nvshmemx_init_attr failed\n"), false;
  return true;
}
