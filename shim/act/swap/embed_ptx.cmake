# Writes the PTX at IN as a C++ string (act/swap/sums.h, kSumsPtx) to OUT; an empty string when
# IN is not given (no nvcc at build time: chunks are then always copied out).
if(IN)
  file(READ "${IN}" ptx)
else()
  set(ptx "")
endif()
file(WRITE "${OUT}.tmp" "// Generated from act/swap/sums.cu by embed_ptx.cmake.\nnamespace gms::act::swap {\nextern const char kSumsPtx[];\nconst char kSumsPtx[] = R\"gmsptx(${ptx})gmsptx\";\n}  // namespace gms::act::swap\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
