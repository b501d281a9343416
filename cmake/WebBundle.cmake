# The HTML pages' front end (web/): one npm project, bundled by esbuild at build time and
# compiled into the binary, so a page is one self-contained file that loads nothing.
#
#   fragscope_web_bundle(<target> PAGE <page>)
#
# bundles web/<page>/main.js (with web/common/ and the CSS it imports) and makes the static
# library <target>, whose header "web/<page>_bundle.h" declares
#   fragscope::web::<page>_bundle() -> WebBundle{script, style}
# `npm ci` runs once per build tree (again when package-lock.json changes), into web/node_modules;
# the npm registry is needed then, never at run time.

find_program(FRAGSCOPE_NODE node REQUIRED)
find_program(FRAGSCOPE_NPM npm REQUIRED)

set(FRAGSCOPE_WEB_DIR "${PROJECT_SOURCE_DIR}/web")
set(FRAGSCOPE_WEB_OUT "${PROJECT_BINARY_DIR}/web")
set(FRAGSCOPE_WEB_NPM_STAMP "${FRAGSCOPE_WEB_OUT}/npm-ci.stamp")

add_custom_command(
  OUTPUT ${FRAGSCOPE_WEB_NPM_STAMP}
  COMMAND ${FRAGSCOPE_NPM} ci --prefix ${FRAGSCOPE_WEB_DIR} --no-audit --no-fund --loglevel=error
  COMMAND ${CMAKE_COMMAND} -E touch ${FRAGSCOPE_WEB_NPM_STAMP}
  DEPENDS ${FRAGSCOPE_WEB_DIR}/package.json ${FRAGSCOPE_WEB_DIR}/package-lock.json
  COMMENT "npm ci in web/ (esbuild, uPlot, playwright-core)"
  VERBATIM)
add_custom_target(fragscope_web_npm DEPENDS ${FRAGSCOPE_WEB_NPM_STAMP})

function(fragscope_web_bundle target)
  cmake_parse_arguments(ARG "" "PAGE" "" ${ARGN})
  set(page ${ARG_PAGE})
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS
       ${FRAGSCOPE_WEB_DIR}/${page}/*.js ${FRAGSCOPE_WEB_DIR}/${page}/*.css
       ${FRAGSCOPE_WEB_DIR}/common/*.js ${FRAGSCOPE_WEB_DIR}/common/*.css)
  set(js ${FRAGSCOPE_WEB_OUT}/${page}.js)
  set(css ${FRAGSCOPE_WEB_OUT}/${page}.css)
  add_custom_command(
    OUTPUT ${js} ${css}
    COMMAND ${FRAGSCOPE_NODE} ${FRAGSCOPE_WEB_DIR}/build.mjs ${page} ${FRAGSCOPE_WEB_OUT}
    # A page that imports no CSS gets an empty style sheet, so the output always exists.
    COMMAND ${CMAKE_COMMAND} -E touch ${css}
    DEPENDS ${sources} ${FRAGSCOPE_WEB_DIR}/build.mjs ${FRAGSCOPE_WEB_NPM_STAMP}
    COMMENT "esbuild: web/${page}"
    VERBATIM)
  set(generated ${PROJECT_BINARY_DIR}/generated/web)
  add_custom_command(
    OUTPUT ${generated}/${page}_bundle.h ${generated}/${page}_bundle.cpp
    COMMAND ${CMAKE_COMMAND} -DPAGE=${page} -DSCRIPT=${js} -DSTYLE=${css} -DOUT_DIR=${generated}
            -P ${PROJECT_SOURCE_DIR}/cmake/EmbedWebBundle.cmake
    DEPENDS ${js} ${css} ${PROJECT_SOURCE_DIR}/cmake/EmbedWebBundle.cmake
    COMMENT "embedding web/${page}"
    VERBATIM)
  add_library(${target} STATIC ${generated}/${page}_bundle.cpp ${generated}/${page}_bundle.h)
  add_dependencies(${target} fragscope_web_npm)
  target_include_directories(${target} PUBLIC ${PROJECT_BINARY_DIR}/generated ${PROJECT_SOURCE_DIR}/src)
endfunction()
