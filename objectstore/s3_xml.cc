#include "objectstore/s3_xml.h"

#include <tinyxml2.h>

#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/message_text.h"

namespace debugplane::objectstore {
namespace {

absl::Status Malformed(absl::string_view why) {
  return absl::DataLossError(absl::StrCat("malformed ListObjectsV2 reply from S3: ", why));
}

// The text of the child element `name` of `parent`; nullptr if there is no
// such child. An element without text is "".
const char* ChildText(const tinyxml2::XMLElement* parent, const char* name) {
  const tinyxml2::XMLElement* child = parent->FirstChildElement(name);
  if (child == nullptr) return nullptr;
  const char* text = child->GetText();
  return text == nullptr ? "" : text;
}

absl::StatusOr<ObjectEntry> ParseContents(const tinyxml2::XMLElement* contents) {
  ObjectEntry entry;
  const char* key = ChildText(contents, "Key");
  if (key == nullptr || *key == '\0') return Malformed("an entry (<Contents>) has no <Key>");
  entry.key = key;
  const char* size = ChildText(contents, "Size");
  if (size == nullptr || !absl::SimpleAtoi(size, &entry.size) || size[0] == '-' || size[0] == '+') {
    return Malformed(absl::StrCat("the <Size> of ", base::QuoteForMessage(entry.key, 128),
                                  " is not a number of bytes"));
  }
  const char* modified = ChildText(contents, "LastModified");
  if (modified != nullptr) {
    std::string error;
    if (!absl::ParseTime(absl::RFC3339_full, modified, &entry.modified, &error)) {
      return Malformed(absl::StrCat("the <LastModified> of ", base::QuoteForMessage(entry.key, 128),
                                    " is not an ISO 8601 time: ", base::QuoteForMessage(modified, 40)));
    }
  }
  return entry;
}

// A name S3 sent URL-encoded (EncodingType "url": '+' for a space, %XX
// for other bytes), decoded; nullopt if a '%' is not followed by two hex
// digits.
std::optional<std::string> UrlDecode(absl::string_view encoded) {
  std::string decoded;
  decoded.reserve(encoded.size());
  for (size_t i = 0; i < encoded.size(); ++i) {
    const char c = encoded[i];
    if (c == '+') {
      decoded.push_back(' ');
    } else if (c != '%') {
      decoded.push_back(c);
    } else {
      if (i + 2 >= encoded.size() || !absl::ascii_isxdigit(encoded[i + 1]) ||
          !absl::ascii_isxdigit(encoded[i + 2])) {
        return std::nullopt;
      }
      auto hex = [](char h) {
        return absl::ascii_isdigit(h) ? h - '0' : absl::ascii_tolower(h) - 'a' + 10;
      };
      decoded.push_back(static_cast<char>(hex(encoded[i + 1]) * 16 + hex(encoded[i + 2])));
      i += 2;
    }
  }
  return decoded;
}

absl::Status DecodeNames(ListObjectsV2Page* page) {
  for (ObjectEntry& object : page->objects) {
    std::optional<std::string> key = UrlDecode(object.key);
    if (!key.has_value() || key->empty()) {
      return Malformed(absl::StrCat("the URL-encoded key ", base::QuoteForMessage(object.key, 128),
                                    " does not decode"));
    }
    object.key = *std::move(key);
  }
  for (std::string& prefix : page->common_prefixes) {
    std::optional<std::string> decoded = UrlDecode(prefix);
    if (!decoded.has_value() || decoded->empty()) {
      return Malformed(absl::StrCat("the URL-encoded common prefix ", base::QuoteForMessage(prefix, 128),
                                    " does not decode"));
    }
    prefix = *std::move(decoded);
  }
  return absl::OkStatus();
}

// `text` with & < > " as XML entities, for an element's text.
std::string XmlEscape(absl::string_view text) {
  std::string escaped;
  for (char c : text) {
    switch (c) {
      case '&':
        escaped += "&amp;";
        break;
      case '<':
        escaped += "&lt;";
        break;
      case '>':
        escaped += "&gt;";
        break;
      case '"':
        escaped += "&quot;";
        break;
      default:
        escaped.push_back(c);
    }
  }
  return escaped;
}

}  // namespace

absl::StatusOr<ListObjectsV2Page> ParseListObjectsV2(absl::string_view xml) {
  tinyxml2::XMLDocument document;
  if (document.Parse(xml.data(), xml.size()) != tinyxml2::XML_SUCCESS) {
    return Malformed(absl::StrCat("not well-formed XML (", document.ErrorName(), " at line ",
                                  document.ErrorLineNum(), ")"));
  }
  const tinyxml2::XMLElement* root = document.RootElement();
  if (root == nullptr || std::strcmp(root->Name(), "ListBucketResult") != 0) {
    return Malformed(absl::StrCat("the root element is ",
                                  root == nullptr ? "missing" : base::QuoteForMessage(root->Name(), 40),
                                  ", not ListBucketResult"));
  }
  ListObjectsV2Page page;
  for (const tinyxml2::XMLElement* contents = root->FirstChildElement("Contents");
       contents != nullptr; contents = contents->NextSiblingElement("Contents")) {
    absl::StatusOr<ObjectEntry> entry = ParseContents(contents);
    if (!entry.ok()) return entry.status();
    page.objects.push_back(*std::move(entry));
  }
  for (const tinyxml2::XMLElement* common = root->FirstChildElement("CommonPrefixes");
       common != nullptr; common = common->NextSiblingElement("CommonPrefixes")) {
    const char* prefix = ChildText(common, "Prefix");
    if (prefix == nullptr || *prefix == '\0') {
      return Malformed("a <CommonPrefixes> has no <Prefix>");
    }
    page.common_prefixes.emplace_back(prefix);
  }
  const char* truncated = ChildText(root, "IsTruncated");
  page.truncated = truncated != nullptr && std::strcmp(truncated, "true") == 0;
  const char* token = ChildText(root, "NextContinuationToken");
  if (token != nullptr) page.next_continuation_token = token;
  if (page.truncated && page.next_continuation_token.empty()) {
    return Malformed("a truncated page has no <NextContinuationToken>");
  }
  const char* encoding = ChildText(root, "EncodingType");
  if (encoding != nullptr && std::strcmp(encoding, "url") == 0) {
    if (absl::Status status = DecodeNames(&page); !status.ok()) return status;
  }
  return page;
}

S3ErrorReply ParseS3Error(absl::string_view xml) {
  S3ErrorReply reply;
  tinyxml2::XMLDocument document;
  if (xml.empty() || document.Parse(xml.data(), xml.size()) != tinyxml2::XML_SUCCESS) return reply;
  const tinyxml2::XMLElement* root = document.RootElement();
  if (root == nullptr || std::strcmp(root->Name(), "Error") != 0) return reply;
  if (const char* code = ChildText(root, "Code")) reply.code = code;
  if (const char* message = ChildText(root, "Message")) reply.message = message;
  return reply;
}

std::optional<std::string> ParseUploadId(absl::string_view xml) {
  tinyxml2::XMLDocument document;
  if (document.Parse(xml.data(), xml.size()) != tinyxml2::XML_SUCCESS) return std::nullopt;
  const tinyxml2::XMLElement* top = document.RootElement();
  if (top == nullptr || std::string_view(top->Name()) != "InitiateMultipartUploadResult") {
    return std::nullopt;
  }
  const char* upload_id = ChildText(top, "UploadId");
  if (upload_id == nullptr) return std::nullopt;
  return std::string(upload_id);
}

std::string CompleteMultipartUploadXml(const std::vector<std::string>& part_etags) {
  std::string completion = "<CompleteMultipartUpload>";
  for (size_t i = 0; i < part_etags.size(); ++i) {
    absl::StrAppend(&completion, "<Part><PartNumber>", i + 1, "</PartNumber><ETag>",
                    XmlEscape(part_etags[i]), "</ETag></Part>");
  }
  absl::StrAppend(&completion, "</CompleteMultipartUpload>");
  return completion;
}

}  // namespace debugplane::objectstore
