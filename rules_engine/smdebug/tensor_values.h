// The elements of a decoded tensor, read where they lie.
//
// A tensor read from an event file keeps its elements as the file has them
// (little-endian, possibly unaligned) in the buffer the record was read into,
// shared by every tensor decoded from that buffer: decoding allocates and
// converts nothing per tensor, and each element is widened to double only
// when it is read. Values built otherwise (tests, the typed repeated fields,
// TensorBoard's simple_value scalars) are owned doubles.
//
// Immutable and cheap to copy (a copy shares the buffer); thread-compatible.
// Holding a copy keeps the whole buffer alive (for smdebug: the event file
// range of one worker's step), so state kept across steps should hold the
// values it needs, not whole Steps.

#ifndef DEBUGPLANE_RULES_ENGINE_SMDEBUG_TENSOR_VALUES_H_
#define DEBUGPLANE_RULES_ENGINE_SMDEBUG_TENSOR_VALUES_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <ostream>
#include <vector>

namespace debugplane::rules_engine {

// Widening conversions of the 16-bit float formats (tensor_decode.cc).
float HalfToFloat(uint16_t bits);
float Bfloat16ToFloat(uint16_t bits);

// How the elements are stored: the TensorFlow dtypes that have values.
enum class ElementType : uint8_t {
  kDouble,
  kFloat,
  kInt32,
  kUint8,
  kInt16,
  kInt8,
  kInt64,
  kBool,
  kBfloat16,
  kUint16,
  kHalf,
  kUint32,
  kUint64,
};

// Bytes per element of `type`.
size_t ElementSize(ElementType type);

// Typed readers of one layout: `r[i]` is element i widened to double, read
// with memcpy (any alignment). TensorValues::Visit hands one to its
// function, so that a loop over the elements is compiled per layout.
template <typename Element>
struct LittleEndianElements {
  const char* data;
  size_t count;
  size_t size() const { return count; }
  double operator[](size_t i) const {
    Element v;
    std::memcpy(&v, data + i * sizeof(Element), sizeof(v));
    return static_cast<double>(v);
  }
};
using FloatElements = LittleEndianElements<float>;
using DoubleElements = LittleEndianElements<double>;
class TensorValues;
// Every other layout: one switch per element (integer, bool and 16-bit
// float tensors are rare and small: labels, masks).
struct OtherElements {
  const TensorValues* values;
  size_t size() const;
  double operator[](size_t i) const;
};

class TensorValues {
 public:
  using value_type = double;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = double;
  using const_reference = double;

  // Reads element by element (a switch per element: for loops that are not
  // hot; hot loops use Visit).
  class const_iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = double;
    using difference_type = std::ptrdiff_t;
    using pointer = const double*;
    using reference = double;

    const_iterator() = default;
    const_iterator(const TensorValues* values, size_t i) : values_(values), i_(i) {}
    double operator*() const { return (*values_)[i_]; }
    double operator[](difference_type n) const { return (*values_)[i_ + n]; }
    const_iterator& operator++() {
      ++i_;
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator old = *this;
      ++i_;
      return old;
    }
    const_iterator& operator--() {
      --i_;
      return *this;
    }
    const_iterator& operator+=(difference_type n) {
      i_ += n;
      return *this;
    }
    const_iterator& operator-=(difference_type n) {
      i_ -= n;
      return *this;
    }
    const_iterator operator+(difference_type n) const { return const_iterator(values_, i_ + n); }
    const_iterator operator-(difference_type n) const { return const_iterator(values_, i_ - n); }
    difference_type operator-(const const_iterator& o) const {
      return static_cast<difference_type>(i_) - static_cast<difference_type>(o.i_);
    }
    bool operator==(const const_iterator& o) const { return i_ == o.i_; }
    bool operator!=(const const_iterator& o) const { return i_ != o.i_; }
    bool operator<(const const_iterator& o) const { return i_ < o.i_; }

   private:
    const TensorValues* values_ = nullptr;
    size_t i_ = 0;
  };
  using iterator = const_iterator;

  TensorValues() = default;
  // Owned doubles.
  TensorValues(std::vector<double> values);  // NOLINT: a vector is values.
  TensorValues(std::initializer_list<double> values)
      : TensorValues(std::vector<double>(values)) {}

  // `count` little-endian elements of `type` at `data` (any alignment),
  // which stays valid as long as `data` is owned (an aliasing shared_ptr
  // into the buffer they were read into).
  static TensorValues View(ElementType type, std::shared_ptr<const char> data, size_t count);

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  ElementType element_type() const { return type_; }
  // Element i widened to double. REQUIRES: i < size().
  double operator[](size_t i) const;
  // The same; throws std::out_of_range past the end (as vector::at).
  double at(size_t i) const;
  double front() const { return (*this)[0]; }
  double back() const { return (*this)[size_ - 1]; }
  const_iterator begin() const { return const_iterator(this, 0); }
  const_iterator end() const { return const_iterator(this, size_); }

  // Calls f with the reader of this layout (FloatElements, DoubleElements or
  // OtherElements) and returns what it returns: one branch per tensor, and
  // the loop in f compiled for each.
  template <typename F>
  decltype(auto) Visit(F&& f) const {
    switch (type_) {
      case ElementType::kFloat:
        return f(FloatElements{bytes(), size_});
      case ElementType::kDouble:
        return f(DoubleElements{bytes(), size_});
      default:
        return f(OtherElements{this});
    }
  }

  // The elements as doubles, in a new vector (for code that needs one:
  // tests, the XGBoost report); `out` replaced, its allocation reused.
  std::vector<double> ToVector() const;
  void CopyTo(std::vector<double>* out) const;
  // Appends the elements as doubles to `out`.
  void AppendTo(std::vector<double>* out) const;

  void clear() { *this = TensorValues(); }
  // `n` owned copies of `v` (no allocation for one value).
  void assign(size_t n, double v);

  // Element-wise, as doubles (NaN unequal, as in vector<double>).
  friend bool operator==(const TensorValues& a, const TensorValues& b);
  friend bool operator!=(const TensorValues& a, const TensorValues& b) { return !(a == b); }
  friend bool operator==(const TensorValues& a, const std::vector<double>& b);
  friend bool operator==(const std::vector<double>& a, const TensorValues& b) { return b == a; }
  // "{1, 2, 3}" (test failure messages).
  friend std::ostream& operator<<(std::ostream& os, const TensorValues& v);

 private:
  // The first byte of the elements: the shared buffer, or scalar_ for one
  // owned double (simple_value scalars, most TensorBoard values, allocate
  // nothing).
  const char* bytes() const {
    return data_ ? data_.get() : reinterpret_cast<const char*>(&scalar_);
  }

  std::shared_ptr<const char> data_;
  size_t size_ = 0;
  double scalar_ = 0;
  ElementType type_ = ElementType::kDouble;
};

inline size_t OtherElements::size() const { return values->size(); }
inline double OtherElements::operator[](size_t i) const { return (*values)[i]; }

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_SMDEBUG_TENSOR_VALUES_H_
