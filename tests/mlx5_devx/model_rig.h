// A NIC model opened through the DEVX seam, as a host would open a real device: PD, UAR,
// EQ, and the driver on top.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "hw/mlx5_devx/driver.h"
#include "hw/mlx5_devx/queue_set.h"
#include "hw/mock_nic/devx/model_devx.h"
#include "hw/mock_nic/fabric.h"

namespace doorbell::testing {

struct DevxRig {
  mem::AddressSpace mem;
  std::unique_ptr<mock_nic::Nic> nic;
  std::unique_ptr<mock_nic::ModelDevx> devx;
  uint32_t pdn = 0;
  devx::Uar uar;

  explicit DevxRig(uint16_t lid = 1) {
    nic = std::make_unique<mock_nic::Nic>(mem, mock_nic::NicConfig{.lid = lid});
    devx = std::make_unique<mock_nic::ModelDevx>(*nic);
    pdn = *devx->alloc_pd();
    uar = *devx->alloc_uar();
  }
  devx::QueueSetSpec spec(uint32_t n, uint32_t log_sq = 6) const {
    devx::QueueSetSpec s;
    s.num_qps = n;
    s.log_sq_size = log_sq;
    s.pdn = pdn;
    s.uar_page = uar.page_id;
    return s;
  }
};

}  // namespace doorbell::testing
