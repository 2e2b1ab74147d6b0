# Compiles every shader variant listed in shaders/variants.cmake to SPIR-V, validates it with
# spirv-val, and embeds the words in the library (no GLSL at run time).
#
# A variant is: vkspec_shader(<name> <source.comp> [DEFINES A=1 B ...])
# The name is what src/ops/<op>.cpp asks the shader registry for.

# VKSPEC_SHADERS_FROM=<another configured build directory of this source tree>: take that build's
# embedded SPIR-V (brought up to date by its own build system first) instead of compiling the
# ~500 variants again. tools/dev.sh points the sanitizer and fuzzer builds at build/: the shaders
# do not depend on the C++ compiler or its flags, and on a 2-vCPU machine compiling them took
# ~370 s of CPU per build directory (2026-12-04).
set(VKSPEC_SHADERS_FROM "" CACHE PATH "a configured build directory whose compiled shaders this build embeds")
if(VKSPEC_SHADERS_FROM)
  get_filename_component(_from "${VKSPEC_SHADERS_FROM}" ABSOLUTE)
  if(NOT EXISTS "${_from}/build.ninja" AND NOT EXISTS "${_from}/Makefile")
    message(FATAL_ERROR "VKSPEC_SHADERS_FROM=${VKSPEC_SHADERS_FROM} is not a configured build directory")
  endif()
  if(_from STREQUAL CMAKE_CURRENT_BINARY_DIR)
    message(FATAL_ERROR "VKSPEC_SHADERS_FROM names this build directory itself")
  endif()
  set(VKSPEC_SHADER_CPP ${_from}/generated/embedded_shaders.cpp)
  add_custom_target(vkspec_shaders
    COMMAND ${CMAKE_COMMAND} --build ${_from} --target vkspec_shaders
    BYPRODUCTS ${VKSPEC_SHADER_CPP}
    COMMENT "shaders from ${_from}"
    VERBATIM)
  file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/generated)
  return()
endif()

set(VKSPEC_SHADER_NAMES "")
set(VKSPEC_SPV_FILES "")
set(_spv_dir ${CMAKE_CURRENT_BINARY_DIR}/spv)
file(MAKE_DIRECTORY ${_spv_dir} ${CMAKE_CURRENT_BINARY_DIR}/generated)
# Shader includes: shaders/*.glsl, and the headers shared with the host (include/vkspec/*.h, e.g.
# tree_limits.h), which the shaders include as "vkspec/<name>.h" (-I include).
file(GLOB VKSPEC_SHADER_INCLUDES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/shaders/*.glsl
     ${CMAKE_CURRENT_SOURCE_DIR}/include/vkspec/*.h)
list(FILTER VKSPEC_SHADER_INCLUDES EXCLUDE REGEX "/vkspec\\.h$")  # the C API: no shader reads it

function(vkspec_shader name source)
  cmake_parse_arguments(ARG "" "" "DEFINES" ${ARGN})
  set(defs "")
  foreach(d ${ARG_DEFINES})
    list(APPEND defs "-D${d}")
  endforeach()
  set(spv ${_spv_dir}/${name}.spv)
  add_custom_command(
    OUTPUT ${spv}
    COMMAND ${GLSLC} --target-env=vulkan1.2 -O -I ${CMAKE_CURRENT_SOURCE_DIR}/shaders
            -I ${CMAKE_CURRENT_SOURCE_DIR}/include ${defs}
            -o ${spv} ${CMAKE_CURRENT_SOURCE_DIR}/shaders/${source}
    COMMAND ${SPIRV_VAL} --target-env vulkan1.2 ${spv}
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/shaders/${source} ${VKSPEC_SHADER_INCLUDES}
    COMMENT "glslc + spirv-val ${name}"
    VERBATIM)
  set(VKSPEC_SHADER_NAMES ${VKSPEC_SHADER_NAMES} ${name} PARENT_SCOPE)
  set(VKSPEC_SPV_FILES ${VKSPEC_SPV_FILES} ${spv} PARENT_SCOPE)
endfunction()

include(${CMAKE_CURRENT_SOURCE_DIR}/shaders/variants.cmake)

set(VKSPEC_SHADER_CPP ${CMAKE_CURRENT_BINARY_DIR}/generated/embedded_shaders.cpp)
add_custom_command(
  OUTPUT ${VKSPEC_SHADER_CPP}
  COMMAND ${CMAKE_COMMAND} -DOUT=${VKSPEC_SHADER_CPP} -DSPV_DIR=${_spv_dir}
          "-DNAMES=${VKSPEC_SHADER_NAMES}" -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed_spirv.cmake
  DEPENDS ${VKSPEC_SPV_FILES} ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed_spirv.cmake
  COMMENT "embedding SPIR-V"
  VERBATIM)
add_custom_target(vkspec_shaders DEPENDS ${VKSPEC_SHADER_CPP})
