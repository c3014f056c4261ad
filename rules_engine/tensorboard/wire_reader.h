// A bounded reader of the protobuf wire format, for the few messages of a
// TensorBoard event record (event_decode.cc decodes them by hand: the
// generated parser and the Tensor built per value cost several times the
// framing and CRC of a record).
//
// Every read checks the bytes left: a varint longer than 10 bytes or cut
// short, a length past the end, or a truncated fixed field makes the read
// fail (false) and leaves the reader where it was. Groups (wire types 3 and
// 4, never written by TensorBoard), the undefined wire types 6 and 7, field
// number 0 and keys wider than 32 bits are refused, so skipping an unknown field never recurses.

#ifndef DEBUGPLANE_RULES_ENGINE_TENSORBOARD_WIRE_READER_H_
#define DEBUGPLANE_RULES_ENGINE_TENSORBOARD_WIRE_READER_H_

#include <cstdint>
#include <cstring>

#include "absl/strings/string_view.h"

namespace debugplane::rules_engine::tensorboard {

enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kFixed32 = 5,
};

// Why a read failed (for the caller's message).
enum class WireError { kNone, kTruncatedVarint, kPastEnd, kBadWireType };

class WireReader {
 public:
  explicit WireReader(absl::string_view bytes)
      : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  bool done() const { return p_ == end_; }
  WireError error() const { return error_; }
  // Bytes consumed so far are not tracked; `remaining` is what is left.
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }

  // The next field's number and wire type.
  bool ReadTag(uint32_t& field, uint32_t& wire_type) {
    uint64_t key = 0;
    if (!ReadVarint(key)) return false;
    // A key fits 32 bits (field numbers < 2^29), as protobuf requires: a
    // wider one must not alias a known field when narrowed.
    if (key > UINT32_MAX) return Fail(WireError::kBadWireType);
    field = static_cast<uint32_t>(key >> 3);
    wire_type = static_cast<uint32_t>(key & 7);
    if (field == 0 || wire_type == 3 || wire_type == 4 || wire_type > 5) {
      return Fail(WireError::kBadWireType);
    }
    return true;
  }

  bool ReadVarint(uint64_t& value) {
    uint64_t v = 0;
    const char* p = p_;
    for (int shift = 0; shift < 70; shift += 7) {
      if (p == end_) return Fail(WireError::kTruncatedVarint);
      const auto byte = static_cast<unsigned char>(*p++);
      v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (byte < 0x80) {
        p_ = p;
        value = v;
        return true;
      }
    }
    return Fail(WireError::kTruncatedVarint);  // More than 10 bytes.
  }

  bool ReadFixed64(uint64_t& value) {
    if (remaining() < 8) return Fail(WireError::kPastEnd);
    value = 0;
    for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(p_[i]);
    p_ += 8;
    return true;
  }

  bool ReadFixed32(uint32_t& value) {
    if (remaining() < 4) return Fail(WireError::kPastEnd);
    value = 0;
    for (int i = 3; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(p_[i]);
    p_ += 4;
    return true;
  }

  bool ReadDouble(double& value) {
    uint64_t bits;
    if (!ReadFixed64(bits)) return false;
    std::memcpy(&value, &bits, sizeof value);
    return true;
  }

  bool ReadFloat(float& value) {
    uint32_t bits;
    if (!ReadFixed32(bits)) return false;
    std::memcpy(&value, &bits, sizeof value);
    return true;
  }

  // A length-delimited field's bytes (a view into the input).
  bool ReadBytes(absl::string_view& bytes) {
    const char* start = p_;
    uint64_t length = 0;
    if (!ReadVarint(length)) return false;
    if (length > remaining()) {
      p_ = start;
      return Fail(WireError::kPastEnd);
    }
    bytes = absl::string_view(p_, static_cast<size_t>(length));
    p_ += length;
    return true;
  }

  // Skips a field of `wire_type` (its tag already read).
  bool Skip(uint32_t wire_type) {
    uint64_t ignored64;
    uint32_t ignored32;
    absl::string_view ignored;
    switch (wire_type) {
      case kVarint: return ReadVarint(ignored64);
      case kFixed64: return ReadFixed64(ignored64);
      case kLengthDelimited: return ReadBytes(ignored);
      case kFixed32: return ReadFixed32(ignored32);
      default: return Fail(WireError::kBadWireType);
    }
  }

  // Records a wrong wire type for a known field.
  bool WrongWireType() { return Fail(WireError::kBadWireType); }

 private:
  bool Fail(WireError e) {
    error_ = e;
    return false;
  }

  const char* p_;
  const char* end_;
  WireError error_ = WireError::kNone;
};

}  // namespace debugplane::rules_engine::tensorboard

#endif  // DEBUGPLANE_RULES_ENGINE_TENSORBOARD_WIRE_READER_H_
