// The value model of the Jinja engine: Python semantics as jinja2 sees them (truthiness, ==, <,
// str()/repr() when printed, json.dumps for tojson). Lists and dicts are shared by reference,
// as in Python, so `namespace` attributes and nested structures behave like the reference.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace t9::jinja {

// Raised inside the engine for any render or parse failure; Template turns it into a Result, so
// it never leaves this library. `line`/`col` are 1-based template positions (0 when unknown).
struct JinjaError {
  std::string message;
  int line = 0;
  int col = 0;
};
[[noreturn]] void fail(std::string message);

enum class Kind : uint8_t {
  Undefined,
  None,
  Bool,
  Int,
  Float,
  String,
  List,
  Dict,
  Callable,
  Loop,
};

class Value;
struct List;
struct Dict;
struct Callable;
struct LoopState;
using ListPtr = std::shared_ptr<List>;
using DictPtr = std::shared_ptr<Dict>;
using CallablePtr = std::shared_ptr<const Callable>;
using LoopPtr = std::shared_ptr<LoopState>;

class Value {
 public:
  Value() : kind_(Kind::None) {}
  Value(bool b) : kind_(Kind::Bool), data_(b) {}                      // NOLINT: implicit by design
  Value(int v) : kind_(Kind::Int), data_(int64_t{v}) {}               // NOLINT
  Value(int64_t v) : kind_(Kind::Int), data_(v) {}                    // NOLINT
  Value(double v) : kind_(Kind::Float), data_(v) {}                   // NOLINT
  Value(std::string s) : kind_(Kind::String), data_(std::move(s)) {}  // NOLINT
  Value(std::string_view s) : kind_(Kind::String), data_(std::string(s)) {}  // NOLINT
  Value(const char* s) : kind_(Kind::String), data_(std::string(s)) {}       // NOLINT
  Value(ListPtr l) : kind_(Kind::List), data_(std::move(l)) {}               // NOLINT
  Value(DictPtr d) : kind_(Kind::Dict), data_(std::move(d)) {}               // NOLINT
  Value(CallablePtr c) : kind_(Kind::Callable), data_(std::move(c)) {}       // NOLINT
  Value(LoopPtr l) : kind_(Kind::Loop), data_(std::move(l)) {}               // NOLINT

  // An undefined value; `hint` is the UndefinedError message used when it is misused.
  static Value undefined(std::string hint);
  static Value markup(std::string s);  // a string marked safe (jinja Markup)
  static Value new_list(std::vector<Value> items = {}, bool is_tuple = false);
  static Value new_iterator(std::vector<Value> items, const char* type = "generator");
  static Value new_dict();
  static Value new_namespace();

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const {
    return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool;
  }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }  // list or tuple
  bool is_dict() const { return kind_ == Kind::Dict; }  // dict or namespace
  bool is_namespace() const;
  bool is_mapping() const { return is_dict() && !is_namespace(); }
  bool is_tuple() const;
  bool is_iterator() const;
  bool is_markup() const { return markup_; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const { return std::get<int64_t>(data_); }
  double as_float() const { return std::get<double>(data_); }
  const std::string& str() const {
    return std::get<std::string>(data_);
  }  // String or Undefined hint
  List& list() const { return *std::get<ListPtr>(data_); }
  Dict& dict() const { return *std::get<DictPtr>(data_); }
  const ListPtr& list_ptr() const { return std::get<ListPtr>(data_); }
  const Callable& callable() const { return *std::get<CallablePtr>(data_); }
  LoopState& loop() const { return *std::get<LoopPtr>(data_); }

  // Numbers (bool counts as int, as in Python).
  int64_t to_int() const { return is_bool() ? int64_t{as_bool()} : as_int(); }
  double to_double() const { return is_float() ? as_float() : double(to_int()); }

  bool truthy() const;
  // Python str(): what {{ value }} prints. Undefined prints as "" (jinja2's default Undefined).
  std::string to_str() const;
  void append_str(std::string& out) const;
  // Python repr(): how values print inside lists and dicts.
  void append_repr(std::string& out) const;
  // The type name Python would use in a message ("str", "int", "dict", ...).
  std::string_view type_name() const;

 private:
  Kind kind_;
  bool markup_ = false;
  std::variant<std::monostate, bool, int64_t, double, std::string, ListPtr, DictPtr, CallablePtr,
               LoopPtr>
      data_;
};

struct List {
  std::vector<Value> items;
  bool is_tuple = false;
  // Non-null for what Python would hand out as a one-shot iterator ("generator" from map/select,
  // "list_reverseiterator" from reverse): iterable, always truthy, but no len(), no indexing, not
  // JSON-serializable and not printable, exactly where jinja2 fails on them.
  const char* iterator_type = nullptr;
};

// Insertion-ordered like a Python dict. Lookups are linear: template dicts are small (messages,
// tool schemas), and a scan over a few keys beats hashing.
struct Dict {
  std::vector<std::pair<Value, Value>> items;
  bool is_namespace = false;

  const Value* find(std::string_view key) const;
  const Value* find(const Value& key) const;
  void set(Value key, Value value);
};

// Positional and keyword arguments of a call.
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;

  // Binds by Python rules against `names`; missing ones are left Undefined. Fails on unknown
  // keywords or too many positionals, naming `fn`.
  std::vector<Value> bind(std::string_view fn, std::initializer_list<std::string_view> names) const;
};

class Interpreter;
struct Callable {
  std::string name;
  std::function<Value(Interpreter&, CallArgs&)> fn;
};

// The `loop` variable of a for loop; attributes are computed on access.
struct LoopState {
  const std::vector<Value>* items = nullptr;
  size_t index0 = 0;
  int depth = 1;
  Value last_changed;  // for loop.changed()
  bool has_changed = false;
};

// Equality as Python ==: 1 == 1.0 == True, list == list elementwise, dict by keys and values.
bool values_equal(const Value& a, const Value& b);
// Python <: numbers, strings (code point order), lists and tuples lexicographically. Fails
// otherwise.
bool values_less(const Value& a, const Value& b);

// Python's float repr: shortest round-trip digits, exponent form outside [1e-4, 1e16).
void append_float_repr(std::string& out, double v);
// Python's repr of a str (quotes chosen as Python does, non-printables escaped).
void append_string_repr(std::string& out, std::string_view s);

struct JsonOptions {
  bool ensure_ascii = false;
  bool has_indent = false;
  std::string indent;  // used when has_indent
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool sort_keys = false;
};
// Python json.dumps with these options (as transformers' tojson calls it).
void append_json(std::string& out, const Value& v, const JsonOptions& opt, int depth = 0);

}  // namespace t9::jinja
