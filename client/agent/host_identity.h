// The agent's training host identity in a job: its host name (unique in the
// job; also the NodeId of its system metrics) and who the agent is.

#ifndef DEBUGPLANE_CLIENT_AGENT_HOST_IDENTITY_H_
#define DEBUGPLANE_CLIENT_AGENT_HOST_IDENTITY_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace debugplane::client {

// Reads an environment variable (nullptr when unset); getenv in production.
using EnvironmentReader = std::function<const char*(const char*)>;

// The host name of this agent, from the first that is given:
//   - `node_id` (--node-id);
//   - SM_CURRENT_HOST (SageMaker's training containers: "algo-2");
//   - GROUP_RANK, else NODE_RANK (torchrun, DeepSpeed): "algo-<rank + 1>";
//   - the machine's name (`machine`).
// INVALID_ARGUMENT naming where the name came from when it is not 1 to 128
// of [A-Za-z0-9._-] (it names files: <minute>.<host>.json), or when a rank
// is not a whole number from 0.
absl::StatusOr<std::string> ResolveHostName(const std::string& node_id,
                                            const EnvironmentReader& environment,
                                            const std::string& machine);

// gethostname(), "" if it fails.
std::string MachineName();

// "<machine>:<pid>": the agent, as the server names the holder of a host.
std::string AgentIdentity();

}  // namespace debugplane::client

#endif  // DEBUGPLANE_CLIENT_AGENT_HOST_IDENTITY_H_
