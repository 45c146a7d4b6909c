// Host cores for one instruction's independent pieces (a matmul's output columns, the chunks of
// an elementwise op). A piece writes outputs no other piece reads or writes and computes them
// exactly as a single thread would, so results and modeled cycles are the same at any thread
// count: threads change only the host time.
#pragma once

#include <cstdint>
#include <functional>

namespace trn::sim {

// The threads ParallelFor uses: TRN_SIM_THREADS when set to a positive integer (1 turns the
// threading off), else the cores this process may run on. Read once per process.
int HostThreads();

// Calls body(begin, end) over disjoint runs covering [0, pieces), each run on whichever thread
// takes it (the caller's included), and returns when all have finished. Runs body(0, pieces) on
// the caller when there is one thread or another instruction is using the workers (executions
// on several client threads at once).
void ParallelFor(int64_t pieces, const std::function<void(int64_t begin, int64_t end)>& body);

}  // namespace trn::sim
