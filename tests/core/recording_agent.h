// An agent connection for manager tests: records the newest directive it was
// sent and whether its stream ended.

#ifndef DEBUGPLANE_TESTS_CORE_RECORDING_AGENT_H_
#define DEBUGPLANE_TESTS_CORE_RECORDING_AGENT_H_

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "core/handlers/training_agent_handler.h"

namespace debugplane::testing {

class RecordingAgent : public core::AgentDirectiveSink {
 public:
  void OnDirective(std::shared_ptr<const v1::ConnectAgentResponse> directive) override {
    absl::MutexLock lock(&mu_);
    last_ = std::move(directive);
  }
  void OnEnd(absl::Status) override { ended_.Notify(); }
  // The newest directive (null before the first).
  std::shared_ptr<const v1::ConnectAgentResponse> last() {
    absl::MutexLock lock(&mu_);
    return last_;
  }
  bool ended() const { return ended_.HasBeenNotified(); }

 private:
  absl::Mutex mu_;
  std::shared_ptr<const v1::ConnectAgentResponse> last_ ABSL_GUARDED_BY(mu_);
  absl::Notification ended_;
};

}  // namespace debugplane::testing

#endif  // DEBUGPLANE_TESTS_CORE_RECORDING_AGENT_H_
