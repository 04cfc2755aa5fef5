// A real model given another chat template: a copy of a GGUF file whose
// tokenizer.chat_template is replaced, every other key and every tensor's bytes unchanged.
// With tests/fixtures/think-chatml.jinja it is how a test makes SmolLM2 think honestly (its
// output is thinking until something closes it) for the app, which loads model files as
// people download them. Plain C++ (engine/gguf); usable from the doctest and Qt Test suites.
#pragma once
#include <cstring>
#include <string>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"

namespace ember::test {

inline void write_model_with_template(const std::string& from, const std::string& to,
                                      const std::string& chat_template) {
    const GgufFile in = GgufFile::open(from);
    GgufWriter w(static_cast<uint32_t>(in.alignment()));
    for (const std::string& key : in.metadata_order()) w.set(key, in.metadata().at(key));
    w.set("tokenizer.chat_template", GgufValue::str(chat_template));
    for (const GgufTensor& t : in.tensors())
        w.add_tensor_lazy(t.name, t.type, t.dims, [&t](uint8_t* dst, size_t n) { std::memcpy(dst, t.data, n); });
    w.write_file(to);  // the tensors are copied now, while `in` is mapped
}

}  // namespace ember::test
