#include "sim/ibgda/stack.h"

namespace doorbell::ibgda {

WorldConfig world_config(const Stack& s, uint32_t npes, uint64_t seed) {
  WorldConfig c;
  c.npes = npes;
  c.seed = seed;
  c.num_rc_per_pe = s.num_rc_per_pe;
  c.num_nics = s.nics_per_pe;
  c.log_qp_depth = s.log_qp_depth;
  c.layout = s.pe_major ? QpLayout::kPeMajor : QpLayout::kQpMajor;
  c.opt.num_requests_in_batch = s.num_requests_in_batch;
  c.opt.num_default_rc_per_pe = s.default_rc_per_pe;
  c.opt.may_skip_cst = !s.cst;
  c.opt.cpu_proxy = s.cpu_proxy;
  c.opt.plant = s.plant;
  c.nic_buf_on_gpumem = s.nic_buffers_on_gpu;
  c.ibuf_slots = s.ibuf_slots;
  c.failover = s.failover;
  c.dc = s.dc;
  c.start_index = s.start_index;
  c.rts.ack_timeout = uint8_t(s.ack_timeout);
  c.rts.retry_count = uint8_t(s.retry_count);
  c.rts.rnr_retry = uint8_t(s.rnr_retry);
  c.response_delay_max = s.response_delay;
  return c;
}

}  // namespace doorbell::ibgda
