// The builtin filters, tests, methods and global functions available to templates: the
// subset of jinja2's (plus HF's additions) that chat templates use. See chat_template.h for
// the list.
#pragma once
#include <string>
#include <string_view>

#include "engine/template/jinja_value.h"

namespace ember::jinja {

class Interpreter;

using FilterFn = Value (*)(Interpreter&, const Value& input, CallArgs& args);
using TestFn = bool (*)(Interpreter&, const Value& input, CallArgs& args);

FilterFn find_filter(std::string_view name);  // nullptr if unknown
TestFn find_test(std::string_view name);      // nullptr if unknown

// `obj.name` as a bound method ('a b'.split, d.items…); Undefined if there is none.
Value find_method(const Value& obj, const std::string& name);

// range, namespace, dict, raise_exception, strftime_now.
void add_globals(Dict& globals);

}  // namespace ember::jinja
