#include "service/http/sagemaker_json.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/timestamp.pb.h"
#include "nlohmann/json.hpp"
#include "service/auth/auth.h"

namespace debugplane::service::http {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using Json = nlohmann::json;

// Timestamps accepted: years 0001 to 9999, as google.protobuf.Timestamp.
constexpr double kMinEpochSeconds = -62135596800.0;
constexpr double kMaxEpochSeconds = 253402300799.0;

bool IsTimestamp(const Descriptor* type) {
  return type->full_name() == google::protobuf::Timestamp::descriptor()->full_name();
}

absl::Status Refused(absl::string_view code, std::string message) {
  absl::Status status = absl::InvalidArgumentError(std::move(message));
  auth::SetAwsErrorCode(status, code);
  return status;
}

absl::Status WrongType(const std::string& path, absl::string_view expected) {
  return Refused("SerializationException", absl::StrCat(path, ": expected ", expected));
}

// At most 64 characters of a value, for messages.
std::string Shown(absl::string_view value) {
  return value.size() <= 64 ? std::string(value) : absl::StrCat(value.substr(0, 64), "...");
}

// A JSON number as an integer within [min, max], or nullopt.
std::optional<int64_t> IntegerIn(const Json& value, int64_t min, int64_t max) {
  if (value.is_number_unsigned()) {
    const uint64_t number = value.get<uint64_t>();
    if (number > static_cast<uint64_t>(max)) return std::nullopt;
    return static_cast<int64_t>(number);
  }
  if (value.is_number_integer()) {
    const int64_t number = value.get<int64_t>();
    if (number < min || number > max) return std::nullopt;
    return number;
  }
  if (value.is_number_float()) {
    const double number = value.get<double>();
    // Whole numbers written with a fraction (5.0) are integers too.
    if (!std::isfinite(number) || std::floor(number) != number ||
        number < static_cast<double>(min) || number >= static_cast<double>(max) + 1.0) {
      return std::nullopt;
    }
    return static_cast<int64_t>(number);
  }
  return std::nullopt;
}

// One value of an integer field of type T (appended when repeated) from a
// JSON number within T's bounds (uint64 up to int64's maximum); kSet and
// kAdd are T's Reflection setters.
template <typename T, auto kSet, auto kAdd>
absl::Status FillInteger(const Json& value, Message* message, const FieldDescriptor* field,
                         const std::string& path) {
  constexpr int64_t kMin = std::is_signed_v<T> ? int64_t{std::numeric_limits<T>::min()} : 0;
  constexpr int64_t kMax = static_cast<int64_t>(
      std::min<uint64_t>(std::numeric_limits<T>::max(), std::numeric_limits<int64_t>::max()));
  const std::optional<int64_t> number = IntegerIn(value, kMin, kMax);
  if (!number) {
    constexpr int kBits = std::is_signed_v<T> ? std::numeric_limits<T>::digits + 1
                                              : std::min(std::numeric_limits<T>::digits, 63);
    return WrongType(
        path, absl::StrCat(std::is_signed_v<T> ? "an integer (" : "a non-negative integer (", kBits,
                           "-bit)"));
  }
  const Reflection& reflection = *message->GetReflection();
  field->is_repeated() ? (reflection.*kAdd)(message, field, static_cast<T>(*number))
                       : (reflection.*kSet)(message, field, static_cast<T>(*number));
  return absl::OkStatus();
}

using IntegerFiller = absl::Status (*)(const Json&, Message*, const FieldDescriptor*,
                                       const std::string&);
using enum FieldDescriptor::CppType;
constexpr std::pair<FieldDescriptor::CppType, IntegerFiller> kIntegerFillers[] = {
    {CPPTYPE_INT32, &FillInteger<int32_t, &Reflection::SetInt32, &Reflection::AddInt32>},
    {CPPTYPE_INT64, &FillInteger<int64_t, &Reflection::SetInt64, &Reflection::AddInt64>},
    {CPPTYPE_UINT32, &FillInteger<uint32_t, &Reflection::SetUInt32, &Reflection::AddUInt32>},
    {CPPTYPE_UINT64, &FillInteger<uint64_t, &Reflection::SetUInt64, &Reflection::AddUInt64>},
};

// The field whose json_name is `name` (protobuf 3.21's Descriptor has no
// such lookup; messages have at most a few dozen fields).
const FieldDescriptor* FieldByJsonName(const Descriptor* type, absl::string_view name) {
  for (int i = 0; i < type->field_count(); ++i) {
    if (type->field(i)->json_name() == name) return type->field(i);
  }
  return nullptr;
}

class JsonToMessage {
 public:
  absl::Status Fill(const Json& object, Message* message, const std::string& path) {
    if (!object.is_object()) return WrongType(path.empty() ? "the body" : path, "an object");
    const Descriptor* type = message->GetDescriptor();
    for (const auto& [name, value] : object.items()) {
      const std::string member = path.empty() ? name : absl::StrCat(path, ".", name);
      const FieldDescriptor* field = FieldByJsonName(type, name);
      if (field == nullptr) {
        return Refused("ValidationException", absl::StrCat(Shown(member), ": no such member in ",
                                                           path.empty() ? "this request" : path,
                                                           " (debugplane does not support it)"));
      }
      if (value.is_null()) continue;
      if (absl::Status filled = FillField(value, message, field, member); !filled.ok()) {
        return filled;
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status FillField(const Json& value, Message* message, const FieldDescriptor* field,
                         const std::string& path) {
    if (field->is_map()) return FillMap(value, message, field, path);
    if (!field->is_repeated()) return FillValue(value, message, field, path);
    if (!value.is_array()) return WrongType(path, "a list");
    for (size_t i = 0; i < value.size(); ++i) {
      if (absl::Status filled =
              FillValue(value[i], message, field, absl::StrCat(path, "[", i, "]"));
          !filled.ok()) {
        return filled;
      }
    }
    return absl::OkStatus();
  }

  absl::Status FillMap(const Json& value, Message* message, const FieldDescriptor* field,
                       const std::string& path) {
    if (!value.is_object()) return WrongType(path, "a map (an object)");
    const FieldDescriptor* key_field = field->message_type()->map_key();
    const FieldDescriptor* value_field = field->message_type()->map_value();
    if (key_field->type() != FieldDescriptor::TYPE_STRING) {
      return absl::InternalError(absl::StrCat(path, ": maps with non-string keys are not served"));
    }
    const Reflection* reflection = message->GetReflection();
    for (const auto& [key, entry_value] : value.items()) {
      Message* entry = reflection->AddMessage(message, field);
      entry->GetReflection()->SetString(entry, key_field, key);
      if (absl::Status filled = FillValue(entry_value, entry, value_field,
                                          absl::StrCat(path, "[\"", Shown(key), "\"]"));
          !filled.ok()) {
        return filled;
      }
    }
    return absl::OkStatus();
  }

  // One value of `field` (singular, or appended when repeated).
  absl::Status FillValue(const Json& value, Message* message, const FieldDescriptor* field,
                         const std::string& path) {
    const Reflection* reflection = message->GetReflection();
    const bool repeated = field->is_repeated();
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING: {
        if (!value.is_string()) return WrongType(path, "a string");
        // nlohmann's parser has already refused ill-formed UTF-8.
        std::string text = value.get<std::string>();
        repeated ? reflection->AddString(message, field, std::move(text))
                 : reflection->SetString(message, field, std::move(text));
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_BOOL:
        if (!value.is_boolean()) return WrongType(path, "a boolean");
        repeated ? reflection->AddBool(message, field, value.get<bool>())
                 : reflection->SetBool(message, field, value.get<bool>());
        return absl::OkStatus();
      case FieldDescriptor::CPPTYPE_INT32:
      case FieldDescriptor::CPPTYPE_INT64:
      case FieldDescriptor::CPPTYPE_UINT32:
      case FieldDescriptor::CPPTYPE_UINT64:
        for (const auto& [type, fill] : kIntegerFillers) {
          if (type == field->cpp_type()) return fill(value, message, field, path);
        }
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
      case FieldDescriptor::CPPTYPE_FLOAT: {
        if (!value.is_number()) return WrongType(path, "a number");
        const double number = value.get<double>();
        if (field->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE) {
          repeated ? reflection->AddDouble(message, field, number)
                   : reflection->SetDouble(message, field, number);
        } else {
          repeated ? reflection->AddFloat(message, field, static_cast<float>(number))
                   : reflection->SetFloat(message, field, static_cast<float>(number));
        }
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_ENUM:
        return FillEnum(value, message, field, path);
      case FieldDescriptor::CPPTYPE_MESSAGE: {
        Message* child = repeated ? reflection->AddMessage(message, field)
                                  : reflection->MutableMessage(message, field);
        if (IsTimestamp(field->message_type())) return FillTimestamp(value, child, path);
        return Fill(value, child, path);
      }
    }
    return absl::InternalError(absl::StrCat(path, ": unsupported field type"));
  }

  absl::Status FillEnum(const Json& value, Message* message, const FieldDescriptor* field,
                        const std::string& path) {
    if (!value.is_string()) return WrongType(path, "a string");
    const std::string name = value.get<std::string>();
    const auto* enum_value = field->enum_type()->FindValueByName(name);
    // Value 0 is proto's "unspecified", never one of SageMaker's values.
    if (enum_value == nullptr || enum_value->number() == 0) {
      std::vector<std::string> allowed;
      for (int i = 0; i < field->enum_type()->value_count(); ++i) {
        if (field->enum_type()->value(i)->number() != 0) {
          allowed.push_back(field->enum_type()->value(i)->name());
        }
      }
      return Refused(
          "ValidationException",
          absl::StrCat(path, ": '", Shown(name), "' is not one of ", absl::StrJoin(allowed, ", ")));
    }
    const Reflection* reflection = message->GetReflection();
    field->is_repeated() ? reflection->AddEnumValue(message, field, enum_value->number())
                         : reflection->SetEnumValue(message, field, enum_value->number());
    return absl::OkStatus();
  }

  absl::Status FillTimestamp(const Json& value, Message* timestamp, const std::string& path) {
    if (!value.is_number()) return WrongType(path, "a timestamp (epoch seconds, a number)");
    const double seconds = value.get<double>();
    if (!std::isfinite(seconds) || seconds < kMinEpochSeconds || seconds > kMaxEpochSeconds) {
      return WrongType(path, "a timestamp between the years 1 and 9999");
    }
    // Milliseconds, the protocol's precision: a finer fraction would not
    // survive the reply (MessageToJson prints milliseconds), so a filter
    // echoed back would differ from the one sent. Whole milliseconds also
    // carry into the next second instead of rounding nanos to 1e9.
    const int64_t millis = std::llround(seconds * 1000.0);
    const int64_t whole = millis >= 0 ? millis / 1000 : -((-millis + 999) / 1000);
    auto* out = static_cast<google::protobuf::Timestamp*>(timestamp);
    out->set_seconds(whole);
    out->set_nanos(static_cast<int32_t>((millis - whole * 1000) * 1000000));
    return absl::OkStatus();
  }
};

Json ValueToJson(const Message& message, const FieldDescriptor* field, int index);

Json MessageToJson(const Message& message) {
  const Descriptor* type = message.GetDescriptor();
  if (IsTimestamp(type)) {
    const auto& timestamp = static_cast<const google::protobuf::Timestamp&>(message);
    if (timestamp.nanos() == 0) return Json(timestamp.seconds());
    // Millisecond precision, as SageMaker answers.
    return Json(static_cast<double>(timestamp.seconds()) +
                std::round(timestamp.nanos() / 1e6) / 1e3);
  }
  Json object = Json::object();
  const Reflection* reflection = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const FieldDescriptor* field : fields) {
    if (field->is_map()) {
      Json map = Json::object();
      for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
        const Message& entry = reflection->GetRepeatedMessage(message, field, i);
        const Reflection* entry_reflection = entry.GetReflection();
        const std::string key =
            entry_reflection->GetString(entry, field->message_type()->map_key());
        map[key] = ValueToJson(entry, field->message_type()->map_value(), -1);
      }
      object[field->json_name()] = std::move(map);
    } else if (field->is_repeated()) {
      Json list = Json::array();
      for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
        list.push_back(ValueToJson(message, field, i));
      }
      object[field->json_name()] = std::move(list);
    } else {
      Json value = ValueToJson(message, field, -1);
      if (!value.is_null()) object[field->json_name()] = std::move(value);
    }
  }
  return object;
}

// A scalar field read with its type's pair of getters: `kSingle`, or
// `kElement` for element `index` of a repeated field (index >= 0).
template <auto kSingle, auto kElement>
Json ReadScalar(const Reflection& reflection, const Message& message, const FieldDescriptor* field,
                int index) {
  return index >= 0 ? Json((reflection.*kElement)(message, field, index))
                    : Json((reflection.*kSingle)(message, field));
}

using ScalarReader = Json (*)(const Reflection&, const Message&, const FieldDescriptor*, int);
constexpr std::pair<FieldDescriptor::CppType, ScalarReader> kScalarReaders[] = {
    {CPPTYPE_STRING, &ReadScalar<&Reflection::GetString, &Reflection::GetRepeatedString>},
    {CPPTYPE_BOOL, &ReadScalar<&Reflection::GetBool, &Reflection::GetRepeatedBool>},
    {CPPTYPE_INT32, &ReadScalar<&Reflection::GetInt32, &Reflection::GetRepeatedInt32>},
    {CPPTYPE_INT64, &ReadScalar<&Reflection::GetInt64, &Reflection::GetRepeatedInt64>},
    {CPPTYPE_UINT32, &ReadScalar<&Reflection::GetUInt32, &Reflection::GetRepeatedUInt32>},
    {CPPTYPE_UINT64, &ReadScalar<&Reflection::GetUInt64, &Reflection::GetRepeatedUInt64>},
    {CPPTYPE_DOUBLE, &ReadScalar<&Reflection::GetDouble, &Reflection::GetRepeatedDouble>},
    {CPPTYPE_FLOAT, &ReadScalar<&Reflection::GetFloat, &Reflection::GetRepeatedFloat>},
};

// The value of `field` (element `index` if repeated, else -1).
Json ValueToJson(const Message& message, const FieldDescriptor* field, int index) {
  const Reflection* r = message.GetReflection();
  const bool repeated = index >= 0;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_ENUM: {
      const int number = repeated ? r->GetRepeatedEnumValue(message, field, index)
                                  : r->GetEnumValue(message, field);
      const auto* value = field->enum_type()->FindValueByNumber(number);
      // An unknown or unspecified value is no SageMaker value: leave it out.
      if (value == nullptr || number == 0) return Json();
      return value->name();
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return MessageToJson(repeated ? r->GetRepeatedMessage(message, field, index)
                                    : r->GetMessage(message, field));
    default:
      for (const auto& [type, read] : kScalarReaders) {
        if (type == field->cpp_type()) return read(*r, message, field, index);
      }
      return Json();
  }
}

}  // namespace

absl::Status ParseSageMakerJson(absl::string_view body, google::protobuf::Message* message) {
  message->Clear();
  Json parsed;
  try {
    parsed = Json::parse(body.begin(), body.end());
  } catch (const Json::parse_error& error) {
    return Refused("SerializationException",
                   absl::StrCat("the request body is not JSON (error at byte ", error.byte, ")"));
  } catch (const Json::exception& error) {
    // Valid JSON that nlohmann cannot hold, e.g. a number beyond a double
    // ("number overflow parsing '1e999'", out_of_range.406).
    return Refused("SerializationException",
                   absl::StrCat("the request body cannot be read: ", error.what()));
  }
  return JsonToMessage().Fill(parsed, message, "");
}

std::string ToSageMakerJson(const google::protobuf::Message& message) {
  return MessageToJson(message).dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace debugplane::service::http
