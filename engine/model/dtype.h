#pragma once
// Element types that appear in safetensors files, with their names and sizes.
#include <cstddef>
#include <optional>
#include <string_view>

namespace nibble::model {

enum class DType {
  BOOL,
  U8,
  I8,
  U16,
  I16,
  F16,
  BF16,
  U32,
  I32,
  F32,
  U64,
  I64,
  F64,
  F8_E4M3,
  F8_E5M2
};

// The safetensors spelling ("BF16", "F8_E4M3", ...) or nullopt for an unknown name.
std::optional<DType> parse_dtype(std::string_view name);
std::string_view dtype_name(DType dtype);
std::size_t dtype_size(DType dtype);

}  // namespace nibble::model
