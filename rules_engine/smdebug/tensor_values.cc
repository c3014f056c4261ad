#include "rules_engine/smdebug/tensor_values.h"

#include <stdexcept>
#include <string>
#include <utility>

namespace debugplane::rules_engine {
namespace {

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

size_t ElementSize(ElementType type) {
  switch (type) {
    case ElementType::kDouble:
    case ElementType::kInt64:
    case ElementType::kUint64:
      return 8;
    case ElementType::kFloat:
    case ElementType::kInt32:
    case ElementType::kUint32:
      return 4;
    case ElementType::kInt16:
    case ElementType::kUint16:
    case ElementType::kHalf:
    case ElementType::kBfloat16:
      return 2;
    case ElementType::kUint8:
    case ElementType::kInt8:
    case ElementType::kBool:
      return 1;
  }
  return 1;
}

TensorValues::TensorValues(std::vector<double> values) {
  size_ = values.size();
  if (size_ == 1) {
    scalar_ = values[0];
  } else if (size_ > 1) {
    auto owned = std::make_shared<const std::vector<double>>(std::move(values));
    const char* first = reinterpret_cast<const char*>(owned->data());
    data_ = std::shared_ptr<const char>(std::move(owned), first);
  }
}

TensorValues TensorValues::View(ElementType type, std::shared_ptr<const char> data,
                                size_t count) {
  TensorValues v;
  v.type_ = type;
  v.size_ = count;
  if (count > 0) v.data_ = std::move(data);
  return v;
}

double TensorValues::operator[](size_t i) const {
  const char* p = bytes() + i * ElementSize(type_);
  switch (type_) {
    case ElementType::kDouble:
      return Load<double>(p);
    case ElementType::kFloat:
      return static_cast<double>(Load<float>(p));
    case ElementType::kInt32:
      return static_cast<double>(Load<int32_t>(p));
    case ElementType::kUint8:
      return static_cast<double>(Load<uint8_t>(p));
    case ElementType::kInt16:
      return static_cast<double>(Load<int16_t>(p));
    case ElementType::kInt8:
      return static_cast<double>(Load<int8_t>(p));
    case ElementType::kInt64:
      return static_cast<double>(Load<int64_t>(p));
    case ElementType::kBool:
      return *p != 0 ? 1.0 : 0.0;
    case ElementType::kBfloat16:
      return static_cast<double>(Bfloat16ToFloat(Load<uint16_t>(p)));
    case ElementType::kUint16:
      return static_cast<double>(Load<uint16_t>(p));
    case ElementType::kHalf:
      return static_cast<double>(HalfToFloat(Load<uint16_t>(p)));
    case ElementType::kUint32:
      return static_cast<double>(Load<uint32_t>(p));
    case ElementType::kUint64:
      return static_cast<double>(Load<uint64_t>(p));
  }
  return 0;
}

double TensorValues::at(size_t i) const {
  if (i >= size_) {
    throw std::out_of_range("TensorValues::at: index " + std::to_string(i) + " of " +
                            std::to_string(size_) + " values");
  }
  return (*this)[i];
}

std::vector<double> TensorValues::ToVector() const {
  std::vector<double> out;
  CopyTo(&out);
  return out;
}

void TensorValues::CopyTo(std::vector<double>* out) const {
  // Resized, not cleared: a vector of the same size (state kept from step to
  // step) is overwritten without a zero fill first.
  out->resize(size_);
  double* dst = out->data();
  Visit([dst](const auto& r) {
    for (size_t i = 0; i < r.size(); ++i) dst[i] = r[i];
  });
}

void TensorValues::AppendTo(std::vector<double>* out) const {
  const size_t start = out->size();
  out->resize(start + size_);
  double* dst = out->data() + start;
  Visit([dst](const auto& r) {
    for (size_t i = 0; i < r.size(); ++i) dst[i] = r[i];
  });
}

void TensorValues::assign(size_t n, double v) {
  if (n == 1) {
    *this = TensorValues();
    size_ = 1;
    scalar_ = v;
  } else {
    *this = TensorValues(std::vector<double>(n, v));
  }
}

bool operator==(const TensorValues& a, const TensorValues& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

bool operator==(const TensorValues& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < b.size(); ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

std::ostream& operator<<(std::ostream& os, const TensorValues& v) {
  os << "{";
  for (size_t i = 0; i < v.size(); ++i) os << (i > 0 ? ", " : "") << v[i];
  return os << "}";
}

}  // namespace debugplane::rules_engine
