#include "client/cli/json_input.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"

namespace debugplane::client {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

// nlohmann's messages start with "[json.exception.parse_error.101] "; the
// id means nothing to a user, the rest ("parse error at line 3, column 7:
// ...") is what they need.
std::string WithoutExceptionId(absl::string_view what) {
  if (absl::StartsWith(what, "[json.exception.")) {
    if (size_t end = what.find("] "); end != absl::string_view::npos) {
      what.remove_prefix(end + 2);
    }
  }
  return std::string(what);
}

// protobuf's JSON parser accepts a member under the field's json_name and
// under its proto name; so does this check, so that it never rejects input
// protobuf would take.
const FieldDescriptor* FindField(const Descriptor* type, absl::string_view key) {
  for (int i = 0; i < type->field_count(); ++i) {
    const FieldDescriptor* field = type->field(i);
    if (field->json_name() == key || field->name() == key) return field;
  }
  return nullptr;
}

struct UnknownField {
  std::string path;
  const Descriptor* parent;
  std::string suggestion;  // A member differing only in case, if any.
};

std::string Join(absl::string_view prefix, absl::string_view name) {
  return prefix.empty() ? std::string(name) : absl::StrCat(prefix, ".", name);
}

// Collects the members of `json` (and of the objects inside it) that `type`
// has no field for. protobuf reports only "Cannot find field." without
// saying which, so this walk exists to name them.
void CollectUnknownFields(const nlohmann::json& json, const Descriptor* type,
                          const std::string& path, std::vector<UnknownField>* unknown) {
  // Well-known types (Timestamp, Struct, wrappers...) have special JSON
  // forms that are not objects with the message's fields.
  if (absl::StartsWith(type->full_name(), "google.protobuf.")) return;
  if (!json.is_object()) return;  // A type error that protobuf reports.
  for (const auto& [key, value] : json.items()) {
    const FieldDescriptor* field = FindField(type, key);
    if (field == nullptr) {
      UnknownField entry{Join(path, key), type, ""};
      for (int i = 0; i < type->field_count(); ++i) {
        if (absl::EqualsIgnoreCase(type->field(i)->json_name(), key)) {
          entry.suggestion = type->field(i)->json_name();
        }
      }
      unknown->push_back(std::move(entry));
      continue;
    }
    if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE || value.is_null()) continue;
    const std::string field_path = Join(path, field->json_name());
    if (field->is_map()) {
      const FieldDescriptor* map_value = field->message_type()->map_value();
      if (map_value->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE || !value.is_object()) {
        continue;
      }
      for (const auto& [map_key, entry] : value.items()) {
        CollectUnknownFields(entry, map_value->message_type(),
                             absl::StrCat(field_path, "[\"", map_key, "\"]"), unknown);
      }
    } else if (field->is_repeated()) {
      if (!value.is_array()) continue;
      for (size_t i = 0; i < value.size(); ++i) {
        CollectUnknownFields(value[i], field->message_type(), absl::StrCat(field_path, "[", i, "]"),
                             unknown);
      }
    } else {
      CollectUnknownFields(value, field->message_type(), field_path, unknown);
    }
  }
}

absl::Status UnknownFieldsError(absl::string_view source,
                                const std::vector<UnknownField>& unknown) {
  auto describe = [](const UnknownField& field) {
    std::string text = absl::StrCat("not a member of ", field.parent->name());
    if (!field.suggestion.empty())
      absl::StrAppend(&text, "; did you mean \"", field.suggestion, "\"?");
    return text;
  };
  constexpr absl::string_view kHint =
      "(--ignore-unknown-fields drops members debugplane does not support)";
  if (unknown.size() == 1) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": unknown field \"", unknown[0].path,
                                                   "\" (", describe(unknown[0]), ")\n  ", kHint));
  }
  std::string message = absl::StrCat(source, ": ", unknown.size(), " unknown fields ", kHint, ":");
  for (const UnknownField& field : unknown) {
    absl::StrAppend(&message, "\n  - ", field.path, ": ", describe(field));
  }
  return absl::InvalidArgumentError(message);
}

// Deepest nesting of arrays and objects read. A request nests a handful of
// levels and protobuf's JSON parser refuses more than 100; the limit keeps
// dump() below, which recurses once per level, within the stack.
constexpr int kMaxNesting = 100;

// Thrown by the parser callback to stop at the first level too deep, before
// the rest of the input is read.
struct TooDeep {};

absl::StatusOr<nlohmann::json> ParseWithComments(absl::string_view text, absl::string_view source) {
  // `depth` counts the arrays and objects around the one starting. The
  // parser's own count, so comments and strings cannot fool it.
  const nlohmann::json::parser_callback_t limit_nesting =
      [](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
        if ((event == nlohmann::json::parse_event_t::object_start ||
             event == nlohmann::json::parse_event_t::array_start) &&
            depth >= kMaxNesting) {
          throw TooDeep{};
        }
        return true;
      };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), limit_nesting,
                                 /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const TooDeep&) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": arrays and objects nested more than ",
                                                   kMaxNesting, " levels deep"));
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": invalid JSON: ", WithoutExceptionId(e.what())));
  }
}

absl::StatusOr<std::string> Dump(const nlohmann::json& json, absl::string_view source) {
  try {
    // Strict: invalid UTF-8 in a string is an error rather than silently
    // replaced, so what the server stores is what the file says.
    return json.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::strict);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": invalid JSON: ", WithoutExceptionId(e.what())));
  }
}

}  // namespace

std::string InputDisplayName(absl::string_view path) {
  return path == "-" ? "<stdin>" : std::string(path);
}

absl::StatusOr<std::string> StripJsonComments(absl::string_view text, absl::string_view source) {
  absl::StatusOr<nlohmann::json> json = ParseWithComments(text, source);
  if (!json.ok()) return json.status();
  return Dump(*json, source);
}

absl::Status ParseJsonMessage(absl::string_view text, absl::string_view source,
                              google::protobuf::Message* message, const JsonInputOptions& options) {
  absl::StatusOr<nlohmann::json> json = ParseWithComments(text, source);
  if (!json.ok()) return json.status();
  if (!json->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": expected a JSON object ({...}) for ",
                                                   message->GetDescriptor()->name(), ", found ",
                                                   json->type_name()));
  }
  if (!options.ignore_unknown_fields) {
    std::vector<UnknownField> unknown;
    CollectUnknownFields(*json, message->GetDescriptor(), "", &unknown);
    if (!unknown.empty()) return UnknownFieldsError(source, unknown);
  }
  absl::StatusOr<std::string> plain = Dump(*json, source);
  if (!plain.ok()) return plain.status();

  google::protobuf::util::JsonParseOptions parse_options;
  parse_options.ignore_unknown_fields = options.ignore_unknown_fields;
  message->Clear();
  const auto status = google::protobuf::util::JsonStringToMessage(*plain, message, parse_options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not a valid ",
                                                   message->GetDescriptor()->name(), ": ",
                                                   std::string(status.message())));
  }
  return absl::OkStatus();
}

absl::Status ReadJsonMessage(absl::string_view path, std::istream& stdin_stream,
                             google::protobuf::Message* message, const JsonInputOptions& options) {
  absl::StatusOr<std::string> text = ReadInput(path, stdin_stream);
  if (!text.ok()) return text.status();
  return ParseJsonMessage(*text, InputDisplayName(path), message, options);
}

}  // namespace debugplane::client
