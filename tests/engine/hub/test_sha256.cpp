// SHA-256 against the FIPS 180-4 examples (NIST CSRC "SHA256.pdf" and the long message of
// FIPS 180-2 appendix B.3), fed whole and in awkward pieces (block boundaries are where an
// incremental hash goes wrong).
#include <doctest/doctest.h>

#include <string>

#include "engine/hub/sha256.h"
#include "kernels/common/error.h"
#include "test_data.h"

using ember::hub::Sha256;
using ember::hub::sha256_hex;

TEST_CASE("SHA-256 of the FIPS 180-4 test vectors") {
    CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    CHECK(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
                     "mnopqrstnopqrstu") == "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    CHECK(sha256_hex(std::string(1000000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("SHA-256 fed in pieces equals SHA-256 fed whole") {
    std::string msg;
    for (int i = 0; i < 1000; ++i) msg += static_cast<char>(i * 7 + 3);
    const std::string whole = sha256_hex(msg);
    for (size_t piece : {1u, 3u, 55u, 56u, 63u, 64u, 65u, 127u, 999u}) {
        Sha256 h;
        for (size_t at = 0; at < msg.size(); at += piece) h.update(std::string_view(msg).substr(at, piece));
        CHECK_MESSAGE(h.finish_hex() == whole, "pieces of ", piece);
    }
    // Lengths around the padding boundary (55/56/64 bytes) against values from Python's hashlib.
    CHECK(sha256_hex(std::string(55, 'x')) == "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072");
    CHECK(sha256_hex(std::string(56, 'x')) == "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e");
}

TEST_CASE("sha256_file hashes a file on disk, and names a missing one") {
    ember::test::TempDir dir;
    ember::test::write_file(dir.file("a"), "abc");
    CHECK(ember::hub::sha256_file(dir.file("a")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK_THROWS_WITH_AS(ember::hub::sha256_file(dir.file("none")), doctest::Contains("none: cannot open"),
                         ember::Error);
}
