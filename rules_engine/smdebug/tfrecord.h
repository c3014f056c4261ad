// TFRecord framing of smdebug event files:
//   uint64 length (LE) | uint32 masked_crc32c(length bytes) | payload | uint32 footer
// where footer is masked_crc32c(payload) or, as smdebug's FileWriter writes
// by default, masked_crc32c of the 10 ASCII bytes "0x12345678".

#ifndef DEBUGPLANE_RULES_ENGINE_SMDEBUG_TFRECORD_H_
#define DEBUGPLANE_RULES_ENGINE_SMDEBUG_TFRECORD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace debugplane::rules_engine {

inline constexpr uint64_t kTfRecordHeaderSize = 12;  // length + its CRC.
inline constexpr uint64_t kTfRecordFooterSize = 4;
inline constexpr uint64_t kTfRecordOverhead = kTfRecordHeaderSize + kTfRecordFooterSize;
// Larger payloads are treated as corruption rather than allocated: a flipped
// high bit in the length must not make the reader wait (or allocate) forever.
inline constexpr uint64_t kTfRecordMaxPayload = uint64_t{1} << 31;

// masked_crc32c("0x12345678"): smdebug's placeholder footer.
uint32_t TfRecordPlaceholderFooter();

struct TfRecordParse {
  enum class Kind {
    kOk,          // A whole, verified record.
    kIncomplete,  // The buffer ends inside the record: wait for more bytes.
    kCorrupt,     // CRC mismatch or absurd length: the data will never be valid.
  };
  Kind kind = Kind::kIncomplete;
  absl::string_view payload;        // kOk: points into the parsed buffer.
  uint64_t size = 0;                // kOk: bytes of the whole record (payload + 16).
  bool placeholder_footer = false;  // kOk: footer was masked_crc32c("0x12345678").
  std::string error;                // kCorrupt: what is wrong, with the absolute offset.
};

// Parses the record at the start of `buf`. `offset` is the position of
// `buf[0]` in its file, only used in error messages.
TfRecordParse ParseTfRecord(absl::string_view buf, uint64_t offset = 0);

struct TfRecordView {
  uint64_t offset = 0;  // Of the record's first byte in the file.
  absl::string_view payload;
};

struct TfRecords {
  std::vector<TfRecordView> records;  // Whole, verified records, in order.
  uint64_t consumed = 0;              // Bytes they span from the buffer start.
  bool incomplete = false;            // Bytes after `consumed` are a partial record.
};

// Parses every record of `buf` (a file read from offset `base_offset`).
// DATA_LOSS naming `file` and the byte offset on corruption; a trailing
// partial record is not an error (incomplete = true).
absl::StatusOr<TfRecords> ParseTfRecords(absl::string_view buf, absl::string_view file,
                                         uint64_t base_offset = 0);

// Parses the one record that the index says spans [offset, offset + length)
// of `file`, given those bytes (fewer if the file is still short). kCorrupt
// also when the record's own length disagrees with `length`.
TfRecordParse ParseTfRecordAt(absl::string_view bytes, absl::string_view file, uint64_t offset,
                              uint64_t length);

// Frames `payload` as one record (for writers and tests).
std::string EncodeTfRecord(absl::string_view payload, bool placeholder_footer = false);

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_SMDEBUG_TFRECORD_H_
