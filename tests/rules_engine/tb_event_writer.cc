#include "tests/rules_engine/tb_event_writer.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "rules_engine/smdebug/tfrecord.h"

namespace debugplane::rules_engine::testing {
namespace {

// Protobuf wire types.
constexpr int kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5;

void Varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void Key(std::string& out, int field, int wire) { Varint(out, (uint64_t(field) << 3) | wire); }
void Fixed(std::string& out, const void* p, size_t n) {
  out.append(static_cast<const char*>(p), n);  // Little-endian host (x86, arm64).
}
void Double(std::string& out, int field, double v) {
  Key(out, field, kFixed64);
  Fixed(out, &v, 8);
}
void Float(std::string& out, int field, float v) {
  Key(out, field, kFixed32);
  Fixed(out, &v, 4);
}
void Bytes(std::string& out, int field, const std::string& bytes) {
  Key(out, field, kBytes);
  Varint(out, bytes.size());
  out += bytes;
}
void Int(std::string& out, int field, uint64_t v) {
  Key(out, field, kVarint);
  Varint(out, v);
}
void PackedDoubles(std::string& out, int field, const std::vector<double>& v) {
  std::string packed;
  for (double d : v) Fixed(packed, &d, 8);
  Bytes(out, field, packed);
}

// TensorShapeProto: repeated Dim dim = 2 { int64 size = 1 }.
std::string Shape(const std::vector<int64_t>& dims) {
  std::string shape;
  for (int64_t d : dims) {
    std::string dim;
    Int(dim, 1, static_cast<uint64_t>(d));
    Bytes(shape, 2, dim);
  }
  return shape;
}

// SummaryMetadata { PluginData plugin_data = 1 { string plugin_name = 1 } }.
std::string Plugin(const std::string& name) {
  std::string plugin, metadata;
  Bytes(plugin, 1, name);
  Bytes(metadata, 1, plugin);
  return metadata;
}

// Event { wall_time = 1, step = 2, summary = 5 { value = 1 { ... } } }.
std::string EventOf(int64_t step, double wall, const std::string& value) {
  std::string summary, event;
  Bytes(summary, 1, value);
  Double(event, 1, wall);
  Int(event, 2, static_cast<uint64_t>(step));
  Bytes(event, 5, summary);
  return event;
}

}  // namespace

std::string TbFileVersionEvent(double wall) {
  std::string event;
  Double(event, 1, wall);
  Bytes(event, 3, "brain.Event:2");
  return event;
}

std::string TbScalarEvent(int64_t step, const std::string& tag, float value, double wall) {
  std::string v;
  Bytes(v, 1, tag);
  Float(v, 2, value);
  return EventOf(step, wall, v);
}

std::string TbTensorScalarEvent(int64_t step, const std::string& tag, float value, double wall) {
  std::string tensor, v;
  Int(tensor, 1, 1);  // DT_FLOAT
  Bytes(tensor, 2, Shape({}));
  Key(tensor, 5, kBytes);  // float_val, packed.
  Varint(tensor, 4);
  Fixed(tensor, &value, 4);
  Bytes(v, 1, tag);
  Bytes(v, 8, tensor);
  Bytes(v, 9, Plugin("scalars"));
  return EventOf(step, wall, v);
}

std::string TbHistogramEvent(int64_t step, const std::string& tag, const HistogramStats& h,
                             double wall) {
  std::string histo, v;
  Double(histo, 1, h.min);
  Double(histo, 2, h.max);
  Double(histo, 3, h.num);
  Double(histo, 4, h.sum);
  Double(histo, 5, h.sum_squares);
  PackedDoubles(histo, 6, h.bucket_limit);
  PackedDoubles(histo, 7, h.bucket);
  Bytes(v, 1, tag);
  Bytes(v, 5, histo);
  return EventOf(step, wall, v);
}

std::string TbTf2HistogramEvent(int64_t step, const std::string& tag,
                                const std::vector<std::array<double, 3>>& rows, double wall) {
  std::string tensor, v, content;
  for (const auto& row : rows) {
    for (double d : row) Fixed(content, &d, 8);
  }
  Int(tensor, 1, 2);  // DT_DOUBLE
  Bytes(tensor, 2, Shape({static_cast<int64_t>(rows.size()), 3}));
  Bytes(tensor, 4, content);
  Bytes(v, 1, tag);
  Bytes(v, 8, tensor);
  Bytes(v, 9, Plugin("histograms"));
  return EventOf(step, wall, v);
}

std::string TbTensorEvent(int64_t step, const std::string& tag, const std::vector<int64_t>& shape,
                          const std::vector<float>& values, double wall,
                          const std::string& plugin) {
  std::string tensor, v, content;
  for (float f : values) Fixed(content, &f, 4);
  Int(tensor, 1, 1);  // DT_FLOAT
  Bytes(tensor, 2, Shape(shape));
  Bytes(tensor, 4, content);
  Bytes(v, 1, tag);
  Bytes(v, 8, tensor);
  if (!plugin.empty()) Bytes(v, 9, Plugin(plugin));
  return EventOf(step, wall, v);
}

std::string TbTextEvent(int64_t step, const std::string& tag, const std::string& text,
                        double wall) {
  std::string tensor, v;
  Int(tensor, 1, 7);  // DT_STRING
  Bytes(tensor, 2, Shape({}));
  Bytes(tensor, 8, text);
  Bytes(v, 1, tag);
  Bytes(v, 8, tensor);
  Bytes(v, 9, Plugin("text"));
  return EventOf(step, wall, v);
}

std::string TbRecord(const std::string& payload) { return EncodeTfRecord(payload); }

TbEventWriter::TbEventWriter(std::string path, double start_wall)
    : path_(std::move(path)), wall_(start_wall) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
  Record(TbFileVersionEvent(NextWall()));
}

double TbEventWriter::NextWall() {
  const double w = wall_;
  wall_ += 0.001;
  return w;
}

void TbEventWriter::Scalar(int64_t step, const std::string& tag, float value) {
  Record(TbScalarEvent(step, tag, value, NextWall()));
}
void TbEventWriter::TensorScalar(int64_t step, const std::string& tag, float value) {
  Record(TbTensorScalarEvent(step, tag, value, NextWall()));
}
void TbEventWriter::Histogram(int64_t step, const std::string& tag, const HistogramStats& h) {
  Record(TbHistogramEvent(step, tag, h, NextWall()));
}
void TbEventWriter::Tf2Histogram(int64_t step, const std::string& tag,
                                 const std::vector<std::array<double, 3>>& rows) {
  Record(TbTf2HistogramEvent(step, tag, rows, NextWall()));
}
void TbEventWriter::Text(int64_t step, const std::string& tag, const std::string& text) {
  Record(TbTextEvent(step, tag, text, NextWall()));
}
void TbEventWriter::Record(const std::string& payload) { Raw(TbRecord(payload)); }
void TbEventWriter::Raw(const std::string& bytes) {
  std::ofstream out(path_, std::ios::binary | std::ios::app);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.flush();
  if (!out) ADD_FAILURE() << "cannot append to " << path_;
}

}  // namespace debugplane::rules_engine::testing
