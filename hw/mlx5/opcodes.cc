#include "hw/mlx5/opcodes.h"

namespace doorbell::mlx5 {

const char* syndrome_name(CqeSyndrome s) {
  switch (s) {
    case CqeSyndrome::kNone: return "none";
    case CqeSyndrome::kLocalLengthErr: return "LOCAL_LENGTH_ERR";
    case CqeSyndrome::kLocalQpOpErr: return "LOCAL_QP_OP_ERR";
    case CqeSyndrome::kLocalProtErr: return "LOCAL_PROT_ERR";
    case CqeSyndrome::kWrFlushErr: return "WR_FLUSH_ERR";
    case CqeSyndrome::kMwBindErr: return "MW_BIND_ERR";
    case CqeSyndrome::kBadRespErr: return "BAD_RESP_ERR";
    case CqeSyndrome::kLocalAccessErr: return "LOCAL_ACCESS_ERR";
    case CqeSyndrome::kRemoteInvalReqErr: return "REMOTE_INVAL_REQ_ERR";
    case CqeSyndrome::kRemoteAccessErr: return "REMOTE_ACCESS_ERR";
    case CqeSyndrome::kRemoteOpErr: return "REMOTE_OP_ERR";
    case CqeSyndrome::kTransportRetryExcErr: return "TRANSPORT_RETRY_EXC_ERR";
    case CqeSyndrome::kRnrRetryExcErr: return "RNR_RETRY_EXC_ERR";
    case CqeSyndrome::kRemoteAbortedErr: return "REMOTE_ABORTED_ERR";
  }
  return "UNKNOWN_SYNDROME";
}

const char* opcode_name(WqeOpcode op) {
  switch (op) {
    case WqeOpcode::kNop: return "NOP";
    case WqeOpcode::kSendInval: return "SEND_INVAL";
    case WqeOpcode::kRdmaWrite: return "RDMA_WRITE";
    case WqeOpcode::kRdmaWriteImm: return "RDMA_WRITE_IMM";
    case WqeOpcode::kSend: return "SEND";
    case WqeOpcode::kSendImm: return "SEND_IMM";
    case WqeOpcode::kRdmaRead: return "RDMA_READ";
    case WqeOpcode::kAtomicCs: return "ATOMIC_CS";
    case WqeOpcode::kAtomicFa: return "ATOMIC_FA";
    case WqeOpcode::kAtomicMaskedCs: return "ATOMIC_MASKED_CS";
    case WqeOpcode::kAtomicMaskedFa: return "ATOMIC_MASKED_FA";
    case WqeOpcode::kDump: return "DUMP";
  }
  return "UNKNOWN_OPCODE";
}

}  // namespace doorbell::mlx5
