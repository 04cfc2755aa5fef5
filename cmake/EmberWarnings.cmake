# Project-wide compiler flags: warnings everywhere, sanitizers on request.
add_compile_options(-Wall -Wextra)
if(EMBER_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
