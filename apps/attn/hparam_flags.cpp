#include "hparam_flags.h"

#include "attn/core/error.h"

namespace attn::cli {

using seq2seq::HFlag;
using seq2seq::HParam;
using seq2seq::HType;

namespace {

const char* type_text(HType t) {
  switch (t) {
    case HType::integer:
    case HType::unsigned64: return "N";
    case HType::real: return "X";
    case HType::text: return "TEXT";
    case HType::boolean: return "BOOL";
  }
  return "";
}

// The table's check as a CLI11 validator: "-3 is not in [1, 1000000]".
CLI::Validator check_of(const HParam& p) {
  return CLI::Validator(
      [&p](std::string& text) -> std::string {
        try {
          seq2seq::parse_hvalue(p, text);
          return "";
        } catch (const ValueError& e) {
          std::string msg = e.what();
          const std::string prefix = seq2seq::flag_of(p) + ": ";
          return msg.rfind(prefix, 0) == 0 ? msg.substr(prefix.size()) : msg;
        }
      },
      seq2seq::range_of(p).empty() ? "" : "in " + seq2seq::range_of(p));
}

}  // namespace

void HParamFlags::add_to(CLI::App* sub, const seq2seq::RunSpec& defaults) {
  for (const HParam& p : seq2seq::hparams()) {
    if (p.flag != HFlag::command) continue;
    if (p.type == HType::boolean) {  // --reverse: on when given
      sub->add_flag(seq2seq::flag_of(p), switches_[std::string(p.name)], std::string(p.help));
      continue;
    }
    CLI::Option* o =
        sub->add_option(seq2seq::flag_of(p), text_[std::string(p.name)], std::string(p.help));
    o->check(check_of(p))->type_name(type_text(p.type));
    const std::string def = seq2seq::format_hvalue(p.get(defaults));
    if (!def.empty()) o->default_str(def);
  }
}

void HParamFlags::collect(const CLI::App* sub, const CLI::App* parent) {
  given_.clear();
  for (const HParam& p : seq2seq::hparams()) {
    const CLI::App* app = p.flag == HFlag::command  ? sub
                          : p.flag == HFlag::global ? parent
                                                    : nullptr;
    if (app == nullptr) continue;
    const CLI::Option* o = app->get_option_no_throw(seq2seq::flag_of(p));
    if (o != nullptr && o->count() > 0) given_.insert(std::string(p.name));
  }
}

seq2seq::HValue HParamFlags::value(const HParam& p) const {
  if (p.type == HType::boolean) return switches_.at(std::string(p.name));
  return seq2seq::parse_hvalue(p, text_.at(std::string(p.name)));
}

void HParamFlags::apply(seq2seq::RunSpec& run) const {
  for (const HParam& p : seq2seq::hparams())
    if (p.flag == HFlag::command && given(p.name)) p.set(run, value(p));
}

}  // namespace attn::cli
