// A sequence appended at the back and popped at the front: a vector with a
// moving start.
//
// The trace buffer's frame index is one (a circular buffer drops its oldest
// frame for each one it stores). A std::deque of its 24-byte entries keeps 21
// to a block, so every index, size and iterator difference divides by 21:
// with the prefetch of the entries 8 frames ahead that was most of what a
// dropped frame cost in a streamed run. Here an index is an add. The popped
// front is given back once it is half of the elements: amortised, each
// element is moved once, and the vector's capacity (reached once) is kept.
#pragma once

#include <cstddef>
#include <vector>

namespace gdbtrace {

template <class T> class FrontPoppedVector {
public:
  size_t size() const { return items_.size() - head_; }
  bool empty() const { return head_ == items_.size(); }
  T& operator[](size_t n) { return items_[head_ + n]; }
  const T& operator[](size_t n) const { return items_[head_ + n]; }
  const T& front() const { return items_[head_]; }
  const T* begin() const { return items_.data() + head_; }
  const T* end() const { return items_.data() + items_.size(); }

  void push_back(const T& item) { items_.push_back(item); }
  void reserve(size_t n) { items_.reserve(n); }
  // The storage, popped front included (for making its pages present).
  const T* storage() const { return items_.data(); }
  size_t stored() const { return items_.size(); }
  size_t capacity() const { return items_.capacity(); }
  void pop_front() {
    if (++head_ * 2 >= items_.size()) {
      items_.erase(items_.begin(), items_.begin() + long(head_)); // in place: no allocation
      head_ = 0;
    }
  }
  void clear() {
    items_.clear();
    head_ = 0;
  }

private:
  std::vector<T> items_;
  size_t head_ = 0; // items_ index of the front
};

} // namespace gdbtrace
