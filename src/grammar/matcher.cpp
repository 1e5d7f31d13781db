#include "grammar/matcher.h"

#include <algorithm>
#include <cstring>

namespace t9::grammar {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar)
    : grammar_(std::move(grammar)) {
  for (uint32_t alt : grammar_->alternatives(grammar_->root())) expand(kAccepted, alt, heads_, 0);
}

int32_t GrammarMatcher::push(uint32_t pos, int32_t parent) {
  frames_.push_back(Frame{pos, parent});
  return static_cast<int32_t>(frames_.size() - 1);
}

// Moves from `pos` (with `parent` below) to every byte class that may be next, adding one stack
// per class found: a rule's end returns to its parent's position, a reference pushes the position
// after it (none when the reference ends its alternative: a tail call keeps stacks shallow on
// right recursion) and goes on into each alternative of the rule.
void GrammarMatcher::expand(int32_t parent, uint32_t pos, Heads& out, int depth) {
  const Grammar& g = *grammar_;
  for (;;) {
    if (depth > kMaxExpandDepth) return;  // a left-recursive rule: no parse through it
    const Elem& e = g.at(pos);
    if (e.kind == Elem::kEnd) {
      if (parent == kAccepted) {
        add_unique(kAccepted, out);
        return;
      }
      pos = frames_[parent].pos;
      parent = frames_[parent].parent;
      continue;
    }
    if (e.kind == Elem::kBytes) {
      add_unique(push(pos, parent), out);
      return;
    }
    const uint32_t rule = e.arg;
    const int32_t ret = g.at(pos + 1).kind == Elem::kEnd ? parent : push(pos + 1, parent);
    for (uint32_t alt : g.alternatives(rule)) expand(ret, alt, out, depth + 1);
    return;
  }
}

bool GrammarMatcher::same_stack(int32_t a, int32_t b) const {
  while (a != b) {
    if (a == kAccepted || b == kAccepted || frames_[a].pos != frames_[b].pos) return false;
    a = frames_[a].parent;
    b = frames_[b].parent;
  }
  return true;
}

// Equal stacks have equal futures: keeping one of each stops an ambiguous grammar (two ways to
// read the same bytes) from doubling the set at every byte.
void GrammarMatcher::add_unique(int32_t head, Heads& out) const {
  for (int32_t h : out)
    if (same_stack(h, head)) return;
  if (out.size() < kMaxHeads) out.push_back(head);
}

bool GrammarMatcher::may_take(const Heads& from, uint8_t b) const {
  for (int32_t h : from)
    if (h != kAccepted && grammar_->byte_class(grammar_->at(frames_[h].pos).arg).has(b))
      return true;
  return false;
}

bool GrammarMatcher::step(const Heads& from, uint8_t b, Heads& to) {
  to.clear();
  for (int32_t h : from) {
    if (h == kAccepted) continue;
    const Frame f = frames_[h];
    if (grammar_->byte_class(grammar_->at(f.pos).arg).has(b)) expand(f.parent, f.pos + 1, to, 0);
  }
  return !to.empty();
}

bool GrammarMatcher::walk(std::string_view bytes, Heads& out) {
  out = heads_;
  for (char c : bytes) {
    if (!step(out, static_cast<uint8_t>(c), scratch_)) return false;
    out.swap(scratch_);
  }
  return true;
}

bool GrammarMatcher::accept(std::string_view bytes) {
  const size_t mark = arena_mark();
  Heads cur;
  if (!walk(bytes, cur)) {
    arena_rollback(mark);
    return false;
  }
  heads_ = std::move(cur);
  if (frames_.size() > (size_t{1} << 16)) compact();
  return true;
}

bool GrammarMatcher::can_take(std::string_view bytes) {
  const size_t mark = arena_mark();
  Heads cur;
  const bool ok = walk(bytes, cur);
  arena_rollback(mark);
  return ok;
}

// Copies the frames the current stacks reach into a fresh arena (the rest is what earlier bytes
// and trials left behind).
void GrammarMatcher::compact() {
  std::vector<Frame> fresh;
  std::vector<int32_t> remap(frames_.size(), -2);
  std::vector<int32_t> chain;
  for (int32_t& h : heads_) {
    chain.clear();
    for (int32_t f = h; f != kAccepted && remap[f] == -2; f = frames_[f].parent) chain.push_back(f);
    for (size_t i = chain.size(); i-- > 0;) {
      const int32_t old_parent = frames_[chain[i]].parent;
      fresh.push_back(
          Frame{frames_[chain[i]].pos, old_parent == kAccepted ? kAccepted : remap[old_parent]});
      remap[chain[i]] = static_cast<int32_t>(fresh.size() - 1);
    }
    if (h != kAccepted) h = remap[h];
  }
  frames_ = std::move(fresh);
}

bool GrammarMatcher::accepting() const {
  return std::find(heads_.begin(), heads_.end(), kAccepted) != heads_.end();
}

bool GrammarMatcher::complete() const {
  return !heads_.empty() &&
         std::all_of(heads_.begin(), heads_.end(), [](int32_t h) { return h == kAccepted; });
}

std::string GrammarMatcher::forced_bytes(size_t max_bytes) {
  std::string out;
  const size_t mark = arena_mark();
  Heads cur = heads_, next;
  while (out.size() < max_bytes) {
    if (std::find(cur.begin(), cur.end(), kAccepted) != cur.end()) break;  // may end here
    const ByteSet s = next_bytes_of(cur);
    int only = -1;
    for (int b = 0; b < 256; ++b) {
      if (!s.has(static_cast<uint8_t>(b))) continue;
      if (only >= 0) {
        only = -2;
        break;
      }
      only = b;
    }
    if (only < 0) break;
    step(cur, static_cast<uint8_t>(only), next);
    cur.swap(next);
    out.push_back(static_cast<char>(only));
  }
  arena_rollback(mark);
  return out;
}

ByteSet GrammarMatcher::next_bytes_of(const Heads& heads) const {
  ByteSet s;
  for (int32_t h : heads)
    if (h != kAccepted) s.merge(grammar_->byte_class(grammar_->at(frames_[h].pos).arg));
  return s;
}

std::string GrammarMatcher::key_of(const Heads& heads) const {
  std::vector<std::string> stacks;
  stacks.reserve(heads.size());
  for (int32_t h : heads) {
    std::string s;
    for (int32_t f = h; f != kAccepted; f = frames_[f].parent) {
      char buf[4];
      std::memcpy(buf, &frames_[f].pos, 4);
      s.append(buf, 4);
    }
    stacks.push_back(std::move(s));
  }
  std::sort(stacks.begin(), stacks.end());
  std::string key;
  for (const std::string& s : stacks) {
    key += std::to_string(s.size()) + ":";
    key += s;
  }
  return key;
}

}  // namespace t9::grammar
