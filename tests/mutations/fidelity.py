# Each ConnectX-fidelity fix of the NIC model (and the driver / doorbell fixes beside it), undone
# one at a time: the test named beside it must fail. Run from the repository root after
# `bash ci/build release`: python3 tests/mutations/fidelity.py (restores every file it touches).
import os, subprocess, sys, shutil
# (file, old, new, test binary, gtest filter)
M = [
 ("core/ibgda/queue.h", "ring_nic_doorbell(ctx, o, qp.bf, mlx5::doorbell_value(to, qp.qpn));", "ring_nic_doorbell(ctx, o, qp.bf, *reinterpret_cast<const uint64_t*>(wqe_at(qp, to - 1)));", "ibgda_protocol_test", "*DoorbellValue*"),
 ("hw/mock_nic/cq.cc", "if (!overrun_ignore) {", "if (!collapsed) {", "mock_nic_fidelity_test", "CqOverrun.*"),
 ("hw/mlx5_devx/driver.cc", "  DB_SET(create_cq_in, p, cq_context.oi, s.overrun_ignore ? 1 : 0);\n", "", "mlx5_devx_prm_golden_test", "PrmGolden.CreateCq"),
 ("hw/mock_nic/engine.cc", "      if (!retries_left_out(nic, qp, rnr, rnr_ns)) return false;  // not answered yet: try again later", "", "mock_nic_fidelity_test", "RetryTimer.*:RnrTimer.*"),
 ("hw/mock_nic/engine.cc", "      rn->fail_qp(*rq);\n      rn->raise({k, rq->qpn, uint8_t(f.syndrome)});", "", "mock_nic_fidelity_test", "Responder.*"),
 ("hw/mock_nic/engine.cc", "        nic.errors_.push_back({qp.qpn, e.wqe_idx, e.wqe_opcode, e.syndrome, e.vendor, nic.clock_ns()});", "", "mock_nic_fidelity_test", "RootCause.*"),
 ("hw/mock_nic/wqe_exec.h", "result[i] = std::byte(old >> (24 - 8 * i));", "result[i] = std::byte(old >> (8 * i));", "mock_nic_engine_test", "Loopback.MaskedAtomics"),
 ("hw/mock_nic/wqe_exec.h", "if (masked && port.responder_atomic_mode() < 3)", "if (false)", "mock_nic_fidelity_test", "AtomicMode.*"),
 ("hw/mlx5_devx/driver.cc", "  DB_SET(modify_qp_in, p, qp_context.atomic_mode, s.atomic_mode);\n", "", "mlx5_devx_prm_golden_test", "PrmGolden.Rst2Init"),
 ("hw/mlx5/cqe.h", "(req ? uint32_t(c.wqe_opcode) << 24 : 0) | ", "", "mock_nic_fidelity_test", "RequesterCqe.*"),
 ("hw/mock_nic/nic.cc", "(to == QpState::kErr && from != QpState::kRst)", "to == QpState::kErr", "mock_nic_fidelity_test", "QpStateMachine.*"),
 ("host/verbs_shim/model.cc", "      did += ring_changed() ? 1 : 0;", "", "verbs_shim_abi_test", "*DataPath"),
]
for f, old, new, binary, flt in M:
    src = open(f).read()
    assert old in src, (f, old)
    shutil.copy(f, f + ".orig")
    open(f, "w").write(src.replace(old, new, 1))
    try:
        b = subprocess.run(["ninja", "-C", "build", "tests/" + binary], capture_output=True, text=True)
        if b.returncode != 0:
            print(f"{f}: BUILD FAILED\n{b.stdout[-800:]}"); continue
        r = subprocess.run(["build/tests/" + binary, "--gtest_filter=" + flt], capture_output=True, text=True, timeout=120)
        failed = [l for l in r.stdout.splitlines() if l.startswith("[  FAILED  ]") and "listed below" not in l]
        print(f"{f}: {old[:60]!r} -> test {'FAILS' if r.returncode else 'PASSES (no teeth!)'}: {failed[:3]}")
    finally:
        shutil.move(f + ".orig", f)
        os.utime(f)  # newer than the mutant's objects, or ninja keeps them
subprocess.run(["ninja", "-C", "build"], capture_output=True)
