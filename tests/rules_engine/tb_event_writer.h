// Test helper: writes TensorBoard event files (`events.out.tfevents.*`) from
// the format itself (TFRecord framing with CRCs; Event, Summary,
// HistogramProto and TensorProto encoded by hand on the protobuf wire), as
// torch's SummaryWriter, tf.summary and Keras write them. Independent of the
// reader's decoder, so the two check each other.
//
//   TbEventWriter w(dir + "/events.out.tfevents.1700000000.host.1.0");
//   w.Scalar(1, "train/loss", 0.69);
//   w.Histogram(1, "gradients/fc1.weight", {...});
//
// Each call appends one record and flushes. I/O failures are gtest failures.

#ifndef DEBUGPLANE_TESTS_RULES_ENGINE_TB_EVENT_WRITER_H_
#define DEBUGPLANE_TESTS_RULES_ENGINE_TB_EVENT_WRITER_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "rules_engine/smdebug/step.h"

namespace debugplane::rules_engine::testing {

// Payloads (an Event's bytes), for tests that frame or cut them themselves.
// The wall time of every event is `wall` (seconds since the epoch).
std::string TbFileVersionEvent(double wall);
// Summary.Value.simple_value (torch's default).
std::string TbScalarEvent(int64_t step, const std::string& tag, float value, double wall);
// A DT_FLOAT scalar tensor with plugin "scalars" (TF2, new_style=True).
std::string TbTensorScalarEvent(int64_t step, const std::string& tag, float value, double wall);
// Summary.Value.histo.
std::string TbHistogramEvent(int64_t step, const std::string& tag, const HistogramStats& h,
                             double wall);
// A DT_DOUBLE [k, 3] tensor (left edge, right edge, count) with plugin
// "histograms" (TF2's tf.summary.histogram).
std::string TbTf2HistogramEvent(int64_t step, const std::string& tag,
                                const std::vector<std::array<double, 3>>& rows, double wall);
// A DT_FLOAT tensor of `shape`, of `plugin` ("": none, a plain TensorProto).
std::string TbTensorEvent(int64_t step, const std::string& tag, const std::vector<int64_t>& shape,
                          const std::vector<float>& values, double wall,
                          const std::string& plugin = "");
// A text summary (plugin "text", DT_STRING): read as skipped.
std::string TbTextEvent(int64_t step, const std::string& tag, const std::string& text, double wall);

// A TFRecord of `payload` (length, CRCs).
std::string TbRecord(const std::string& payload);

class TbEventWriter {
 public:
  // Creates `path` (and its directories) and writes the file_version event,
  // as every TensorBoard writer does.
  explicit TbEventWriter(std::string path, double start_wall = 1.7e9);

  void Scalar(int64_t step, const std::string& tag, float value);
  void TensorScalar(int64_t step, const std::string& tag, float value);
  void Histogram(int64_t step, const std::string& tag, const HistogramStats& h);
  void Tf2Histogram(int64_t step, const std::string& tag,
                    const std::vector<std::array<double, 3>>& rows);
  void Text(int64_t step, const std::string& tag, const std::string& text);
  // Appends `bytes` as they are (a torn record, garbage).
  void Raw(const std::string& bytes);
  // Appends the framed record of `payload`.
  void Record(const std::string& payload);
  // The wall time of the next event (each event advances it by 1 ms).
  double wall() const { return wall_; }
  const std::string& path() const { return path_; }

 private:
  double NextWall();
  std::string path_;
  double wall_;
};

}  // namespace debugplane::rules_engine::testing

#endif  // DEBUGPLANE_TESTS_RULES_ENGINE_TB_EVENT_WRITER_H_
