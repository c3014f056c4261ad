#include "rules_engine/insights/bucket_pyramid.h"

#include <algorithm>
#include <cmath>

namespace debugplane::rules_engine::insights {

namespace {

// Whether `window` (the top level) cannot take `index` without dropping
// what it holds: the top level must keep everything.
template <typename Cell>
bool WouldNotFit(const LevelWindow<Cell>& window, int64_t index, int capacity) {
  if (window.empty()) return false;
  if (index >= window.first() + capacity) return true;
  return index < window.first() && window.first() + window.Size() - index > capacity;
}

}  // namespace

template <typename Cell>
Cell* LevelWindow<Cell>::At(int64_t index, int capacity, bool may_evict) {
  if (cells_.empty()) {
    if (index < complete_from_) return nullptr;
    first_ = index;
    cells_.emplace_back();
    return &cells_.back();
  }
  if (index < first_) {
    if (index < complete_from_ || first_ - index + Size() > capacity) return nullptr;
    cells_.insert(cells_.begin(), static_cast<size_t>(first_ - index), Cell{});
    first_ = index;
    return &cells_.front();
  }
  if (index < first_ + Size()) return &cells_[static_cast<size_t>(index - first_)];
  if (index - first_ + 1 > capacity) {
    if (!may_evict) return nullptr;
    const int64_t new_first = index - capacity + 1;
    if (new_first >= first_ + Size()) {
      cells_.clear();
      first_ = index;
    } else {
      cells_.erase(cells_.begin(), cells_.begin() + (new_first - first_));
      first_ = new_first;
    }
    complete_from_ = first_;
  }
  cells_.resize(static_cast<size_t>(index - first_ + 1));
  return &cells_.back();
}

template class LevelWindow<SampleCell>;
template class LevelWindow<float>;

// --- SamplePyramid -------------------------------------------------------

void SamplePyramid::Add(double t, double value) {
  if (!std::isfinite(t) || !std::isfinite(value) || std::fabs(t) > 1e15) return;
  const int64_t index = BucketIndex(t, 0);
  if (levels_.empty()) {
    levels_.emplace_back();
    open_ = index;
    first_time_ = last_time_ = t;
  }
  if (index > open_) Advance(index);
  bool stored = false;
  for (int level = 0; level < levels(); ++level) {
    const int64_t at = index >> level;
    if (SampleCell* cell = CellAt(level, at)) {
      cell->Add(value);
      stored = true;
    }
    // The open bucket of this level is merged upwards when it closes.
    if (at == (open_ >> level)) break;
  }
  if (!stored) {
    ++dropped_;
    return;
  }
  ++samples_;
  first_time_ = std::min(first_time_, t);
  last_time_ = std::max(last_time_, t);
}

void SamplePyramid::Advance(int64_t index) {
  const int64_t old = open_;
  for (int level = 0; level + 1 < levels(); ++level) {
    if ((old >> level) == (index >> level)) break;
    const SampleCell* closed = levels_[level].Find(old >> level);
    if (closed == nullptr || closed->count == 0) continue;
    const SampleCell copy = *closed;  // CellAt may add a level (vector growth).
    if (SampleCell* parent = CellAt(level + 1, old >> (level + 1))) parent->Merge(copy);
  }
  open_ = index;
}

SampleCell* SamplePyramid::CellAt(int level, int64_t index) {
  while (level == levels() - 1 && WouldNotFit(levels_[level], index, capacity_)) AddLevel();
  return levels_[level].At(index, capacity_, /*may_evict=*/level + 1 < levels());
}

void SamplePyramid::AddLevel() {
  const int top = levels() - 1;
  LevelWindow<SampleCell> next;
  const LevelWindow<SampleCell>& window = levels_[top];
  for (int64_t i = 0; i < window.Size(); ++i) {
    const int64_t index = window.first() + i;
    const SampleCell& cell = window.cells()[static_cast<size_t>(i)];
    // The open bucket joins its parent when it closes (Advance).
    if (cell.count == 0 || index == (open_ >> top)) continue;
    next.At(index >> 1, capacity_, true)->Merge(cell);
  }
  levels_.push_back(std::move(next));
}

void SamplePyramid::Read(const LevelChoice& choice, std::vector<SampleCell>* out) const {
  // Never negative, even for a choice made outside ChooseLevel's contract.
  const int64_t n = std::max<int64_t>(0, choice.output_buckets());
  out->reserve(out->size() + static_cast<size_t>(n));
  if (levels_.empty()) {
    out->resize(out->size() + static_cast<size_t>(n));
    return;
  }
  // Levels above the top are read from the top (it holds everything).
  const int source = std::min(choice.level, levels() - 1);
  const int shift = choice.level - source;
  // The open buckets below `source` are not merged into it yet.
  SampleCell open_below;
  for (int level = 0; level < source; ++level) {
    if (const SampleCell* c = levels_[level].Find(open_ >> level)) open_below.Merge(*c);
  }
  const int64_t open_at_source = open_ >> source;
  const LevelWindow<SampleCell>& window = levels_[source];
  const int64_t window_end = window.first() + window.Size();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t lo = (choice.first + i * choice.merge) << shift;
    const int64_t hi = (choice.first + (i + 1) * choice.merge) << shift;
    SampleCell cell;
    const int64_t a = std::max(lo, window.first());
    const int64_t b = std::min(hi, window_end);
    for (int64_t j = a; j < b; ++j)
      cell.Merge(window.cells()[static_cast<size_t>(j - window.first())]);
    if (open_at_source >= lo && open_at_source < hi) cell.Merge(open_below);
    out->push_back(cell);
  }
}

size_t SamplePyramid::memory_bytes() const { return sizeof(*this) + CellBytes(); }

// --- BusyPyramid ---------------------------------------------------------

void BusyPyramid::AddInterval(double start, double end) {
  if (!std::isfinite(start) || !std::isfinite(end) || end <= start || std::fabs(end) > 1e15) {
    return;
  }
  if (levels_.empty()) {
    levels_.emplace_back();
    first_time_ = start;
    last_time_ = end;
  }
  first_time_ = std::min(first_time_, start);
  last_time_ = std::max(last_time_, end);
  ++intervals_;
  for (int level = 0; level < levels(); ++level) AddToLevel(level, start, end);
}

void BusyPyramid::AddToLevel(int level, double start, double end) {
  const int64_t last = BucketIndex(std::nextafter(end, start), level);
  const int64_t unclipped = BucketIndex(start, level);
  // The top level keeps everything: a level more when it cannot.
  while (level == levels() - 1 &&
         (last - unclipped + 1 > capacity_ || WouldNotFit(levels_[level], last, capacity_) ||
          WouldNotFit(levels_[level], unclipped, capacity_))) {
    AddLevel();
  }
  // Below the top, buckets older than the window holds would be dropped at
  // once.
  const int64_t first = std::max(unclipped, last - capacity_ + 1);
  LevelWindow<float>& window = levels_[level];
  const bool may_evict = level + 1 < levels();
  // Newest first: the window moves forward once, then older cells exist.
  for (int64_t index = last; index >= first; --index) {
    const double lo = std::max(start, BucketStart(index, level));
    const double hi = std::min(end, BucketStart(index + 1, level));
    if (hi <= lo) continue;
    if (float* cell = window.At(index, capacity_, may_evict)) *cell += static_cast<float>(hi - lo);
  }
}

void BusyPyramid::AddLevel() {
  const LevelWindow<float>& window = levels_.back();
  LevelWindow<float> next;
  for (int64_t i = 0; i < window.Size(); ++i) {
    const float busy = window.cells()[static_cast<size_t>(i)];
    if (busy != 0) *next.At((window.first() + i) >> 1, capacity_, true) += busy;
  }
  levels_.push_back(std::move(next));
}

void BusyPyramid::Read(const LevelChoice& choice, std::vector<double>* out) const {
  const int64_t n = std::max<int64_t>(0, choice.output_buckets());
  out->reserve(out->size() + static_cast<size_t>(n));
  if (levels_.empty()) {
    out->resize(out->size() + static_cast<size_t>(n), 0.0);
    return;
  }
  const int source = std::min(choice.level, levels() - 1);
  const int shift = choice.level - source;
  const LevelWindow<float>& window = levels_[source];
  const int64_t window_end = window.first() + window.Size();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t lo = (choice.first + i * choice.merge) << shift;
    const int64_t hi = (choice.first + (i + 1) * choice.merge) << shift;
    double busy = 0;
    for (int64_t j = std::max(lo, window.first()); j < std::min(hi, window_end); ++j) {
      busy += window.cells()[static_cast<size_t>(j - window.first())];
    }
    out->push_back(busy);
  }
}

size_t BusyPyramid::memory_bytes() const { return sizeof(*this) + CellBytes(); }

}  // namespace debugplane::rules_engine::insights
