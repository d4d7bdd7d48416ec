# Compiler flags shared by every target: warnings, optional -Werror and sanitizers.
# Targets opt in with nibble_target_defaults(<target>).

if(NIBBLE_SANITIZE)
  # Applied globally so that every object (and GoogleTest's main) is instrumented alike.
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
if(NIBBLE_FUZZ_HARNESSES)
  # libFuzzer's coverage instrumentation on every object; the harnesses link -fsanitize=fuzzer.
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

function(nibble_target_defaults target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-missing-field-initializers>
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${NIBBLE_WERROR}>>:-Werror>
    $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${NIBBLE_WERROR}>>:-Werror=all-warnings>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
endfunction()
