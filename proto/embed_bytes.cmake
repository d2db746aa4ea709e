# cmake -DIN=file -DOUT=file.cpp -DSYMBOL=name -P embed_bytes.cmake: writes a C++ source that
# defines `const std::string_view SYMBOL` over the bytes of IN (namespace trainlet::proto).
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" hex_length)
math(EXPR size "${hex_length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
string(REGEX REPLACE "(('\\\\x[0-9a-f][0-9a-f]',){16})" "\\1\n" bytes "${bytes}")
file(WRITE ${OUT} "// Generated from ${IN} by proto/embed_bytes.cmake. Do not edit.\n"
     "#include <string_view>\n\nnamespace trainlet::proto {\nnamespace {\n"
     "const char kBytes[] = {\n${bytes}};\n}  // namespace\n\n"
     "extern const std::string_view ${SYMBOL}(kBytes, ${size});\n\n}  // namespace trainlet::proto\n")
