// SPDX-License-Identifier: MIT
// gk::graph: the nodes needed to compute some tensors, in an order where every node comes
// after its sources. build_forward_expand walks sources depth-first, left to right (the
// reference's order, so node lists agree), with an explicit stack: a chain of a million
// nodes costs heap, not call stack. A tensor with no op that is not a parameter is a leaf
// (an input or weight); everything else is a node, views included (they compute nothing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_set>
#include <utility>
#include <vector>

#include "gk/tensor.hpp"

namespace gk {

class graph {
 public:
  graph() = default;

  void build_forward_expand(tensor* root) {
    if (!root || visited_.count(root)) return;
    // (tensor, index of the next source to visit)
    std::vector<std::pair<tensor*, int>> stack;
    stack.emplace_back(root, 0);
    visited_.insert(root);
    while (!stack.empty()) {
      auto& [t, next] = stack.back();
      if (next < max_src) {
        tensor* s = t->src[next++];
        if (s && visited_.insert(s).second) stack.emplace_back(s, 0);
        continue;
      }
      tensor* done = t;
      stack.pop_back();
      if (done->op == op::none && !(done->flags & flag_param)) leafs_.push_back(done);
      else nodes_.push_back(done);
    }
  }

  std::span<tensor* const> nodes() const noexcept { return nodes_; }
  std::span<tensor* const> leafs() const noexcept { return leafs_; }
  int n_nodes() const noexcept { return static_cast<int>(nodes_.size()); }
  int n_leafs() const noexcept { return static_cast<int>(leafs_.size()); }
  // i < 0 counts from the end: node(-1) is the last node built.
  tensor* node(int i) const noexcept {
    return nodes_[static_cast<std::size_t>(i < 0 ? n_nodes() + i : i)];
  }
  bool contains(const tensor* t) const noexcept { return visited_.count(t) != 0; }
  void clear() {
    nodes_.clear();
    leafs_.clear();
    visited_.clear();
  }

 private:
  std::vector<tensor*> nodes_;
  std::vector<tensor*> leafs_;
  std::unordered_set<const tensor*> visited_;
};

}  // namespace gk
