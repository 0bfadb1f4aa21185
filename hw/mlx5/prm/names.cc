#include "hw/mlx5/prm/layouts.h"

namespace doorbell::prm {

const char* opcode_name(uint16_t op) {
  switch (op) {
    case kCreateCq: return "CREATE_CQ";
    case kDestroyCq: return "DESTROY_CQ";
    case kQueryCq: return "QUERY_CQ";
    case kCreateQp: return "CREATE_QP";
    case kDestroyQp: return "DESTROY_QP";
    case kRst2InitQp: return "RST2INIT_QP";
    case kInit2RtrQp: return "INIT2RTR_QP";
    case kRtr2RtsQp: return "RTR2RTS_QP";
    case kRts2RtsQp: return "RTS2RTS_QP";
    case kQp2Err: return "2ERR_QP";
    case kQp2Rst: return "2RST_QP";
    case kQueryQp: return "QUERY_QP";
    case kCreateDct: return "CREATE_DCT";
    case kDestroyDct: return "DESTROY_DCT";
  }
  return "UNKNOWN_OPCODE";
}

const char* status_name(uint8_t status) {
  switch (status) {
    case kStatOk: return "OK";
    case kStatInternal: return "INTERNAL_ERR";
    case kStatBadOp: return "BAD_OP";
    case kStatBadParam: return "BAD_PARAM";
    case kStatBadSysState: return "BAD_SYS_STATE";
    case kStatBadRes: return "BAD_RES";
    case kStatResBusy: return "RES_BUSY";
    case kStatLimit: return "LIM_ERR";
    case kStatBadResState: return "BAD_RES_STATE";
    case kStatBadIndex: return "BAD_INDEX";
    case kStatNoResources: return "NO_RESOURCES";
    case kStatBadQpState: return "BAD_QP_STATE";
    case kStatBadPacket: return "BAD_PKT";
    case kStatBadSizeOutsCqes: return "BAD_SIZE_OUTS_CQES";
    case kStatBadInputLen: return "BAD_INPUT_LEN";
    case kStatBadOutputLen: return "BAD_OUTPUT_LEN";
  }
  return "UNKNOWN_STATUS";
}

}  // namespace doorbell::prm
