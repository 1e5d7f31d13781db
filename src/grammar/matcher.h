// GrammarMatcher: which bytes may come next under a Grammar, given the bytes so far. The state is
// the set of parse stacks consistent with the bytes so far (a pushdown recognizer with
// nondeterminism, as llama.cpp's grammar sampler): each stack is a chain of frames, the top one at
// a byte class, the ones below the places to return to when a rule ends. Frames live in an arena
// and chains share their tails, so copying a state to try a byte is cheap, and the arena can be
// rolled back after a trial (how the token mask walks the vocabulary: grammar/token_mask.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace t9::grammar {

class GrammarMatcher {
 public:
  // A stack is the index of its top frame in the arena; kAccepted is the empty stack (the bytes
  // so far complete a sentence).
  static constexpr int32_t kAccepted = -1;
  using Heads = std::vector<int32_t>;

  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);

  // Takes `bytes` if every one of them may come next, in order; otherwise changes nothing.
  bool accept(std::string_view bytes);
  // Whether accept(bytes) would take them; changes nothing.
  bool can_take(std::string_view bytes);
  bool accepting() const;  // the bytes so far are a whole sentence
  bool complete() const;   // ... and nothing may follow them
  bool failed() const { return heads_.empty(); }
  // The bytes that may come next.
  ByteSet next_bytes() const { return next_bytes_of(heads_); }
  ByteSet next_bytes_of(const Heads& heads) const;
  // The bytes that must come next whatever is chosen (each step admits exactly one byte and the
  // text may not end there), at most max_bytes of them: what a grammar forces (JSON keys).
  std::string forced_bytes(size_t max_bytes);
  // Equal keys mean equal sets of futures (the stacks' contents, in a canonical order).
  std::string key() const { return key_of(heads_); }
  std::string key_of(const Heads& heads) const;
  const Grammar& grammar() const { return *grammar_; }

  // Low-level trials (grammar/token_mask.cpp): step `from` over one byte into `to` (cleared
  // first), with the new frames in the arena; false when no stack takes the byte. Roll the arena
  // back to a mark taken before the trials to discard them.
  const Heads& heads() const { return heads_; }
  bool step(const Heads& from, uint8_t b, Heads& to);
  bool may_take(const Heads& from, uint8_t b) const;
  size_t arena_mark() const { return frames_.size(); }
  void arena_rollback(size_t mark) { frames_.resize(mark); }

 private:
  struct Frame {
    uint32_t pos;    // into Grammar code: a kBytes element (a top) or a return position
    int32_t parent;  // the frame below, or kAccepted
  };
  static constexpr int kMaxExpandDepth = 512;  // a left-recursive rule would loop forever
  static constexpr size_t kMaxHeads = 4096;    // an ambiguous grammar's stacks, at most

  // The stacks after `bytes` from the current ones (new frames in the arena); false at a refused
  // byte.
  bool walk(std::string_view bytes, Heads& out);
  int32_t push(uint32_t pos, int32_t parent);
  void expand(int32_t parent, uint32_t pos, Heads& out, int depth);
  void add_unique(int32_t head, Heads& out) const;
  bool same_stack(int32_t a, int32_t b) const;
  void compact();

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Frame> frames_;
  Heads heads_;
  Heads scratch_;
};

}  // namespace t9::grammar
