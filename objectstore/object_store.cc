#include "objectstore/object_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/message_text.h"

namespace debugplane::objectstore {
namespace {

constexpr size_t kMaxKeyBytes = 4096;
// Keys are shown in full up to this many characters.
constexpr size_t kShownKeyChars = 256;

absl::Status InvalidKey(absl::string_view key, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("invalid object key ", base::QuoteForMessage(key, kShownKeyChars), ": ", why));
}

// Every '/'-separated component of `key` is a plain name: not empty, not "."
// or "..". (A list prefix ending in part of a name is checked the same way:
// a last component "." or ".." could only ever match those names.)
absl::Status CheckComponents(absl::string_view key, absl::string_view original) {
  size_t start = 0;
  while (start <= key.size()) {
    size_t end = key.find('/', start);
    if (end == absl::string_view::npos) end = key.size();
    const absl::string_view component = key.substr(start, end - start);
    if (component.empty()) return InvalidKey(original, "empty component ('//' or a leading '/')");
    if (component == "." || component == "..") {
      return InvalidKey(original, "'.' and '..' components are not allowed");
    }
    start = end + 1;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateKey(absl::string_view key, bool allow_trailing_slash) {
  if (key.empty()) return InvalidKey(key, "empty");
  if (key.size() > kMaxKeyBytes) {
    return InvalidKey(key, absl::StrCat(key.size(), " bytes long; at most ", kMaxKeyBytes));
  }
  if (absl::StrContains(key, absl::string_view("\0", 1))) return InvalidKey(key, "NUL byte");
  if (key.front() == '/') return InvalidKey(key, "absolute (leading '/'); keys are relative");
  absl::string_view body = key;
  if (body.back() == '/') {
    if (!allow_trailing_slash) return InvalidKey(key, "trailing '/'");
    body.remove_suffix(1);
  }
  return CheckComponents(body, key);
}

absl::Status ValidatePrefix(absl::string_view prefix) {
  if (prefix.empty()) return absl::OkStatus();
  return ValidateKey(prefix, /*allow_trailing_slash=*/true);
}

absl::StatusOr<base::UniqueFd> ObjectStore::OpenDirectoryForWatch(absl::string_view prefix) const {
  return absl::UnimplementedError(
      absl::StrCat(Describe(prefix), ": this store has no change notification; poll it"));
}

namespace {

// "16 MiB (16777216 bytes)", "512 bytes".
std::string ShownBytes(uint64_t bytes) {
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) {
    return absl::StrCat(bytes >> 20, " MiB (", bytes, " bytes)");
  }
  if (bytes >= (1 << 10) && bytes % (1 << 10) == 0) {
    return absl::StrCat(bytes >> 10, " KiB (", bytes, " bytes)");
  }
  return absl::StrCat(bytes, " bytes");
}

}  // namespace

absl::Status OverReadLimitError(absl::string_view described, uint64_t size,
                                const ReadLimit& limit) {
  const std::string how_big = size > limit.max_bytes
                                  ? absl::StrCat("is ", size, " bytes")
                                  : absl::StrCat("has more than ", limit.max_bytes, " bytes");
  return absl::ResourceExhaustedError(absl::StrCat(described, " ", how_big, "; ", limit.what,
                                                   " may have at most ",
                                                   ShownBytes(limit.max_bytes)));
}

absl::StatusOr<std::string> ObjectStore::ReadAtMost(absl::string_view key,
                                                    const ReadLimit& limit) const {
  std::string out;
  absl::Status status = ReadAtMostInto(key, limit, &out);
  if (!status.ok()) return status;
  return out;
}

absl::Status ObjectStore::ReadAtMostInto(absl::string_view key, const ReadLimit& limit,
                                         std::string* out) const {
  const uint64_t max_bytes = std::min(limit.max_bytes, kMaxReadBytes - 1);
  absl::Status status = ReadRangeInto(key, 0, max_bytes + 1, out);
  if (!status.ok()) return status;
  if (out->size() <= max_bytes) return absl::OkStatus();
  out->clear();
  out->shrink_to_fit();  // Nothing of an oversized object is kept.
  // Its size for the message, where the store says it.
  absl::StatusOr<ObjectEntry> entry = Stat(key);
  return OverReadLimitError(Describe(key), entry.ok() ? entry->size : 0,
                            ReadLimit{max_bytes, limit.what});
}

absl::StatusOr<std::string> ObjectStore::ReadRange(absl::string_view key, uint64_t offset,
                                                   uint64_t length) const {
  std::string out;
  absl::Status status = ReadRangeInto(key, offset, length, &out);
  if (!status.ok()) return status;
  return out;
}

absl::StatusOr<ListResult> ObjectStore::ListAll(ListOptions options, size_t limit) const {
  ListResult all;
  while (true) {
    absl::StatusOr<ListResult> page = List(options);
    if (!page.ok()) return page.status();
    for (ObjectEntry& entry : page->objects) all.objects.push_back(std::move(entry));
    for (std::string& prefix : page->common_prefixes) {
      all.common_prefixes.push_back(std::move(prefix));
    }
    if (!page->truncated) return all;
    if (all.objects.size() + all.common_prefixes.size() >= limit) {
      all.truncated = true;
      all.next_start_after = page->next_start_after;
      return all;
    }
    // The next page must start after this one's start, or the listing
    // would be followed forever (a store that says "more" but moves on
    // nowhere).
    if (page->next_start_after <= options.start_after) {
      return absl::DataLossError(
          absl::StrCat("the listing of ", Describe(options.prefix),
                       " says more keys follow but does not move on (next page after ",
                       base::QuoteForMessage(page->next_start_after, kShownKeyChars), ")"));
    }
    options.start_after = std::move(page->next_start_after);
  }
}

std::string StoreLocation::Key(absl::string_view relative) const {
  if (prefix.empty()) return std::string(relative);
  if (relative.empty()) return prefix;
  return absl::StrCat(prefix, "/", relative);
}

std::string StoreLocation::DirectoryPrefix(absl::string_view relative) const {
  const std::string key = Key(relative);
  return key.empty() ? key : absl::StrCat(key, "/");
}

std::string StoreLocation::Describe() const { return store->Describe(prefix); }

StoreLocation StoreLocation::Below(absl::string_view relative) const {
  return StoreLocation{store, Key(relative)};
}

}  // namespace debugplane::objectstore
