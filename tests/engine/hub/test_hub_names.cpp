// Remote names before they touch a URL or the disk, GGUF file-name conventions, the API's
// JSON, and Content-Range: the pure parts of the hub client.
#include <doctest/doctest.h>

#include <string>

#include "engine/gguf/gguf_split.h"
#include "engine/hub/hub_json.h"
#include "engine/hub/hub_names.h"
#include "kernels/common/error.h"

using namespace ember::hub;

TEST_CASE("file names with '..', absolute paths, NUL bytes or backslashes are rejected") {
    for (const std::string& bad :
         {std::string("../x.gguf"), std::string("a/../../x.gguf"), std::string("/etc/passwd"), std::string("a//b.gguf"),
          std::string("a/./b.gguf"), std::string("x.gguf\0.txt", 11), std::string("a\\..\\b.gguf"),
          std::string("line\nbreak.gguf"), std::string(""), std::string("dir/")}) {
        INFO("name: ", bad);
        CHECK_THROWS_AS(check_remote_path(bad), ember::Error);
    }
    CHECK_THROWS_WITH(check_remote_path(std::string("x.gguf\0.txt", 11)), doctest::Contains("NUL byte"));
    CHECK_THROWS_WITH(check_remote_path("/etc/passwd"), doctest::Contains("absolute path"));
    CHECK_NOTHROW(check_remote_path("Q4_K_M/Model-Q4_K_M-00001-of-00002.gguf"));
    CHECK_NOTHROW(check_remote_path("model..v2.gguf"));  // ".." inside a name is just dots

    CHECK_NOTHROW(check_repo_id("bartowski/Llama-3.2-1B-Instruct-GGUF"));
    CHECK_NOTHROW(check_repo_id("gpt2"));
    for (const char* bad : {"..", "a/..", "a/b/c", "/a", "a/", "a b/c", ".hidden/x", ""}) {
        INFO("repo: ", bad);
        CHECK_THROWS_AS(check_repo_id(bad), ember::Error);
    }
    CHECK_THROWS_AS(check_revision("../main"), ember::Error);
    CHECK_NOTHROW(check_revision("0123abcd"));
}

TEST_CASE("quantization labels and split parts are read from GGUF file names") {
    CHECK(quant_of("Llama-3.2-1B-Instruct-Q4_K_M.gguf") == "Q4_K_M");
    CHECK(quant_of("qwen2.5-0.5b-instruct-q8_0.gguf") == "Q8_0");
    CHECK(quant_of("model.Q4_1.gguf") == "Q4_1");
    CHECK(quant_of("gemma-3-270m-it-IQ4_XS.gguf") == "IQ4_XS");
    CHECK(quant_of("x-fp16.gguf") == "F16");
    CHECK(quant_of("x-BF16-00001-of-00003.gguf") == "BF16");
    CHECK(quant_of("Q6_K/x-Q6_K-00002-of-00002.gguf") == "Q6_K");
    CHECK(quant_of("stories260K.gguf") == "");
    CHECK(quant_of("model_q4_k_s.gguf") == "Q4_K_S");
    CHECK(quant_of("x-Q9_0.gguf") == "");
    CHECK(quant_of("x-IQ2_XXS.gguf") == "IQ2_XXS");
    CHECK(quant_of("MyQ4_K_Mmodel.gguf") == "");  // a label must stand between separators

    const auto s = ember::split_name_of("dir/x-Q8_0-00002-of-00003.gguf");
    REQUIRE(s);
    CHECK(s->stem == "dir/x-Q8_0");
    CHECK(s->index == 2);
    CHECK(s->count == 3);
    CHECK_FALSE(ember::split_name_of("x-00004-of-00003.gguf"));
    CHECK_FALSE(ember::split_name_of("x-00000-of-00003.gguf"));
    CHECK_FALSE(ember::split_name_of("x-Q8_0.gguf"));
}

TEST_CASE("a split model is one choice, complete or not at all, and a missing quant lists what exists") {
    const std::vector<RemoteFile> files = {
        {"README.md", 10, ""},
        {"m-Q8_0.gguf", 2000, std::string(64, 'a')},
        {"m-Q4_K_M-00001-of-00002.gguf", 700, std::string(64, 'b')},
        {"m-Q4_K_M-00002-of-00002.gguf", 300, std::string(64, 'c')},
        {"m-Q6_K-00001-of-00002.gguf", 900, std::string(64, 'd')},  // part 2 missing
        {"mmproj-m-F16.gguf", 50, std::string(64, 'e')},
    };
    const auto choices = gguf_choices(files);
    REQUIRE(choices.size() == 2);
    CHECK(choices[0].quant == "Q4_K_M");
    REQUIRE(choices[0].files.size() == 2);
    CHECK(choices[0].files[0].path == "m-Q4_K_M-00001-of-00002.gguf");
    CHECK(choices[0].files[1].path == "m-Q4_K_M-00002-of-00002.gguf");
    CHECK(choices[0].total_bytes() == 1000);
    CHECK(choose_quant(files, "o/m", "q8_0").files.at(0).path == "m-Q8_0.gguf");
    CHECK_THROWS_WITH(choose_quant(files, "o/m", "Q6_K"),
                      doctest::Contains("has no Q6_K model; available: Q4_K_M (1000 B in 2 parts), Q8_0 (2.0 KiB)"));
}

TEST_CASE("Content-Range is parsed strictly") {
    const auto r = parse_content_range("bytes 100-199/1000");
    REQUIRE(r);
    CHECK(r->first == 100);
    CHECK(r->last == 199);
    CHECK(r->total == 1000);
    CHECK(parse_content_range("bytes 0-9/*")->total == 0);
    for (const char* bad : {"", "bytes */1000", "bytes 5-4/10", "bytes 0-10/10", "items 0-1/2", "bytes 0-1/2x",
                            "bytes -1-2/3", "bytes 99999999999999999999-1/2"}) {
        INFO(bad);
        CHECK_FALSE(parse_content_range(bad));
    }
}

TEST_CASE("the file tree's JSON: LFS hashes kept, directories skipped, hostile entries refused") {
    const auto files = parse_tree_response(R"([
        {"type": "directory", "path": "sub", "oid": "x", "size": 0},
        {"type": "file", "path": "README.md", "size": 12, "oid": "abc"},
        {"type": "file", "path": "sub/m-Q8_0.gguf", "size": 5, "oid": "def",
         "lfs": {"oid": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "size": 1234, "pointerSize": 134}}
    ])");
    REQUIRE(files.size() == 2);
    CHECK(files[0].path == "README.md");
    CHECK(files[0].sha256.empty());
    CHECK(files[1].path == "sub/m-Q8_0.gguf");
    CHECK(files[1].size == 1234);  // the LFS object's size, not the pointer's
    CHECK(files[1].sha256 == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK_THROWS_WITH(parse_tree_response(R"([{"type": "file", "path": "../../evil.gguf", "size": 1}])"),
                      doctest::Contains("'..' component"));
    CHECK_THROWS_WITH(parse_tree_response(R"([{"type": "file", "path": "/abs.gguf", "size": 1}])"),
                      doctest::Contains("absolute path"));
    CHECK_THROWS_WITH(parse_tree_response("[{\"type\": \"file\", \"path\": \"a\\u0000b.gguf\", \"size\": 1}]"),
                      doctest::Contains("NUL byte"));
    CHECK_THROWS_WITH(parse_tree_response(R"([{"path": "a.gguf", "size": 1, "lfs": {"oid": "nothex"}}])"),
                      doctest::Contains("without a SHA-256"));
    CHECK_THROWS_WITH(parse_tree_response("{"), doctest::Contains("not valid JSON"));
    CHECK_THROWS_WITH(parse_tree_response("{}"), doctest::Contains("not a JSON array"));
    CHECK_THROWS_WITH(parse_tree_response(R"([{"path": "a.gguf", "size": -1}])"), doctest::Contains("has no size"));

    const auto found = parse_search_response(
        R"([{"id": "a/b", "downloads": 7, "likes": 1, "tags": ["gguf", 3]}, {"downloads": 9}, 5])");
    REQUIRE(found.size() == 1);
    CHECK(found[0].id == "a/b");
    CHECK(found[0].downloads == 7);
    CHECK(found[0].tags == std::vector<std::string>{"gguf"});
}
