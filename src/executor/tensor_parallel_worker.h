// run_tensor_parallel_worker: what a node other than node 0 of a multi-node tensor-parallel group runs instead of a
// server (docs/deployment-multinode.md). It joins node 0, loads this node's ranks, makes their pools at node 0's
// sizes, then runs the forward pass of every step node 0 sends until node 0 says shut down.
#pragma once

#include <string>

#include "common/status.h"
#include "executor/create_engine.h"

namespace pagoda::executor {

// Returns ok after node 0's shutdown message; an error that says what happened when this node cannot join or load,
// when a step fails here (the group cannot go on: node 0 is told, and closes it), or when node 0 goes away
// (closed connection, or silence that TCP keep-alive notices). options.node_rank must be 1..nnodes-1.
Status run_tensor_parallel_worker(const std::string& model_dir, const EngineOptions& options);

}  // namespace pagoda::executor
