#include "rules_engine/smdebug/tfrecord.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "rules_engine/smdebug/crc32c.h"

namespace debugplane::rules_engine {
namespace {

uint64_t DecodeLE64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}
uint32_t DecodeLE32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}
void PutLE(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

TfRecordParse Corrupt(std::string error) {
  TfRecordParse r;
  r.kind = TfRecordParse::Kind::kCorrupt;
  r.error = std::move(error);
  return r;
}

}  // namespace

uint32_t TfRecordPlaceholderFooter() {
  static const uint32_t footer = MaskedCrc32c("0x12345678");
  return footer;
}

TfRecordParse ParseTfRecord(absl::string_view buf, uint64_t offset) {
  TfRecordParse r;
  if (buf.size() < kTfRecordHeaderSize) return r;  // kIncomplete.
  const uint64_t length = DecodeLE64(buf.data());
  const uint32_t length_crc = DecodeLE32(buf.data() + 8);
  if (MaskedCrc32c(buf.substr(0, 8)) != length_crc) {
    return Corrupt(absl::StrFormat("record at offset %d: length CRC mismatch (length field %d)",
                                   offset, length));
  }
  if (length > kTfRecordMaxPayload) {
    return Corrupt(absl::StrFormat("record at offset %d: absurd length %d", offset, length));
  }
  if (buf.size() - kTfRecordHeaderSize < length + kTfRecordFooterSize) return r;
  const absl::string_view payload = buf.substr(kTfRecordHeaderSize, length);
  const uint32_t footer = DecodeLE32(buf.data() + kTfRecordHeaderSize + length);
  if (footer == MaskedCrc32c(payload)) {
    r.placeholder_footer = false;
  } else if (footer == TfRecordPlaceholderFooter()) {
    r.placeholder_footer = true;
  } else {
    return Corrupt(
        absl::StrFormat("record at offset %d: payload CRC mismatch (%d bytes)", offset, length));
  }
  r.kind = TfRecordParse::Kind::kOk;
  r.payload = payload;
  r.size = length + kTfRecordOverhead;
  return r;
}

absl::StatusOr<TfRecords> ParseTfRecords(absl::string_view buf, absl::string_view file,
                                         uint64_t base_offset) {
  TfRecords out;
  while (out.consumed < buf.size()) {
    TfRecordParse r = ParseTfRecord(buf.substr(out.consumed), base_offset + out.consumed);
    if (r.kind == TfRecordParse::Kind::kIncomplete) {
      out.incomplete = true;
      break;
    }
    if (r.kind == TfRecordParse::Kind::kCorrupt) {
      return absl::DataLossError(absl::StrCat(file, ": ", r.error));
    }
    out.records.push_back({base_offset + out.consumed, r.payload});
    out.consumed += r.size;
  }
  return out;
}

TfRecordParse ParseTfRecordAt(absl::string_view bytes, absl::string_view file, uint64_t offset,
                              uint64_t length) {
  if (length < kTfRecordOverhead || length - kTfRecordOverhead > kTfRecordMaxPayload) {
    return Corrupt(absl::StrFormat("%s: index gives record at offset %d an impossible length %d",
                                   file, offset, length));
  }
  if (bytes.size() > length) bytes = bytes.substr(0, length);
  TfRecordParse r = ParseTfRecord(bytes, offset);
  if (r.kind == TfRecordParse::Kind::kCorrupt) {
    r.error = absl::StrCat(file, ": ", r.error);
    return r;
  }
  if (bytes.size() >= kTfRecordHeaderSize) {
    // The header is verified (else kCorrupt above): its length must agree
    // with the index, or the index points into the middle of something else.
    const uint64_t record_length = DecodeLE64(bytes.data()) + kTfRecordOverhead;
    if (record_length != length) {
      return Corrupt(absl::StrFormat("%s: record at offset %d is %d bytes, the index says %d", file,
                                     offset, record_length, length));
    }
  }
  return r;
}

std::string EncodeTfRecord(absl::string_view payload, bool placeholder_footer) {
  std::string out;
  out.reserve(payload.size() + kTfRecordOverhead);
  PutLE(&out, payload.size(), 8);
  PutLE(&out, MaskedCrc32c(out), 4);
  out.append(payload.data(), payload.size());
  PutLE(&out, placeholder_footer ? TfRecordPlaceholderFooter() : MaskedCrc32c(payload), 4);
  return out;
}

}  // namespace debugplane::rules_engine
