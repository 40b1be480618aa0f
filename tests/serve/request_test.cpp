// A request's fields as LibreTranslate reads them (src/serve/request.h):
// JSON, form data and the query string, typed and checked, every bad value
// a 400 with a message.
#include "serve/request.h"

#include "testing.h"

using namespace attn::serve;

namespace {

template <class F>
void expect_400(F f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected 400 with '" << part << "'";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(Request, JsonFieldsTyped) {
  const Fields f = Fields::from_json(
      R"({"q": ["a", "b"], "source": "en", "n": 3, "x": 2.5, "s": "4", "t": true, "z": null})");
  bool list = false;
  EXPECT_EQ(*f.strings("q", list), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(list);
  EXPECT_EQ(*f.strings("source", list), std::vector<std::string>{"en"});
  EXPECT_FALSE(list);
  EXPECT_EQ(*f.integer("n", 0, 10), 3);
  EXPECT_EQ(*f.integer("s", 0, 10), 4);  // a number written as text, as form data has it
  EXPECT_EQ(*f.number("x", 0, 10), 2.5);
  EXPECT_TRUE(*f.boolean("t"));
  EXPECT_FALSE(f.string("z").has_value());  // null: as if not given
  EXPECT_FALSE(f.string("missing").has_value());
  expect_400([&] { (void)f.integer("x", 0, 10); }, "x must be an integer");
  expect_400([&] { (void)f.integer("n", 5, 10); }, "n must be in [5, 10]");
  expect_400([&] { (void)f.string("n"); }, "n must be a string, got 3");
  expect_400([&] { (void)f.boolean("n"); }, "n must be true or false");
  const Fields bad = Fields::from_json(R"({"q": ["a", 1]})");
  expect_400([&] { (void)bad.strings("q", list); }, "q[1] must be a string");
}

TEST(Request, JsonThatIsNotAnObjectOrTooDeep) {
  expect_400([] { Fields::from_json("{\"q\": "); }, "not valid JSON");
  expect_400([] { Fields::from_json("[1]"); }, "must be an object, got a list of 1 item");
  expect_400([] { Fields::from_json(R"({"q": 1, "q": 2})"); }, "\"q\" appears twice");
  expect_400([] { Fields::from_json("{\"q\": \"\xff\"}"); }, "not valid JSON");
  const std::string deep = "{\"q\": " + std::string(1000, '[') + std::string(1000, ']') + "}";
  expect_400([&] { Fields::from_json(deep); }, "nested more than 16 levels");
  EXPECT_EQ(json_depth(R"({"a": "[[[[", "b": [[1]], "c": "\"{"})", 100), 3);
}

TEST(Request, FormAndQueryDecoded) {
  Fields f = Fields::from_form("q=Hello+world%21&source=en&q=second&alternatives=2&flag=on");
  f.add_query("target=fr&source=de");
  EXPECT_EQ(*f.string("q"), "Hello world!");  // the first of two
  EXPECT_EQ(*f.string("source"), "en");  // the body's over the query's
  EXPECT_EQ(*f.string("target"), "fr");
  EXPECT_EQ(*f.integer("alternatives", 0, 3), 2);
  EXPECT_TRUE(*f.boolean("flag"));
  expect_400([] { Fields::from_form("q=%G0"); }, "bad percent-encoding");
  expect_400([] { Fields::from_form("q=%4"); }, "bad percent-encoding");
  const Fields bad = Fields::from_form("q=%FF%FE");
  expect_400([&] { (void)bad.string("q"); }, "invalid UTF-8");
  EXPECT_EQ(*url_decode("a%20b+c%2B"), "a b c+");
  EXPECT_FALSE(url_decode("%").has_value());
}
