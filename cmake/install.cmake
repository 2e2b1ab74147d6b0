# `cmake --install`: the C API header, the shared library (SONAME libvkspec.so.0) with its CMake
# package (find_package(vkspec) → vkspec::vkspec) and pkg-config file (vkspec.pc).
#
# The C++ API and the static library stay in the build tree: their headers include volk and
# their archive needs volk and libzip beside it; embedders use the C API.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set_target_properties(vkspec_shared PROPERTIES EXPORT_NAME vkspec)
install(TARGETS vkspec_shared EXPORT vkspecTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_COMPONENT Development
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES include/vkspec/vkspec.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/vkspec)
install(EXPORT vkspecTargets NAMESPACE vkspec:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vkspec)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/vkspecConfig.cmake.in [=[
@PACKAGE_INIT@
# vkspec.h includes <vulkan/vulkan_core.h> (Debian: libvulkan-dev); the library loads the Vulkan
# loader at run time and links nothing of Vulkan.
include("${CMAKE_CURRENT_LIST_DIR}/vkspecTargets.cmake")
check_required_components(vkspec)
]=])
configure_package_config_file(${CMAKE_CURRENT_BINARY_DIR}/vkspecConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/vkspecConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vkspec)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/vkspecConfigVersion.cmake
                                 VERSION ${VKSPEC_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/vkspecConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/vkspecConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vkspec)

# pkg-config: the prefix relative to the .pc file, so `cmake --install --prefix DIR` anywhere works.
file(RELATIVE_PATH VKSPEC_PC_UP /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/vkspec.pc.in [=[
prefix=${pcfiledir}/@VKSPEC_PC_UP@
libdir=${prefix}/@CMAKE_INSTALL_LIBDIR@
includedir=${prefix}/@CMAKE_INSTALL_INCLUDEDIR@

Name: vkspec
Description: Lossless speculative decoding on Vulkan (C API)
Version: @VKSPEC_VERSION@
Cflags: -I${includedir}
Libs: -L${libdir} -lvkspec
]=])
configure_file(${CMAKE_CURRENT_BINARY_DIR}/vkspec.pc.in ${CMAKE_CURRENT_BINARY_DIR}/vkspec.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/vkspec.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
