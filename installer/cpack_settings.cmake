# CPack settings shared by every generator, then per platform (included by CMakeLists.txt;
# per-generator overrides at packaging time are in cpack_options.cmake.in).
set(CPACK_PACKAGE_NAME "ember")
set(CPACK_PACKAGE_VENDOR "Ember")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Run large language models locally, on your NVIDIA GPU or CPU")
set(CPACK_PACKAGE_DESCRIPTION_FILE ${CMAKE_CURRENT_SOURCE_DIR}/debian/description.txt)
set(CPACK_PACKAGE_CONTACT "Ember developers <ember@example.org>")  # placeholder: installer/README.md
set(CPACK_PACKAGE_INSTALL_DIRECTORY "Ember")
set(CPACK_STRIP_FILES ON)
set(CPACK_COMPONENTS_ALL cli app cuda doc)
set(CPACK_COMPONENT_CLI_DISPLAY_NAME "ember command-line tool")
set(CPACK_COMPONENT_APP_DISPLAY_NAME "Ember desktop app")
set(CPACK_COMPONENT_CUDA_DISPLAY_NAME "NVIDIA GPU backend (CUDA)")
set(CPACK_COMPONENT_CUDA_DESCRIPTION "Runs models on an NVIDIA GPU; needs the NVIDIA driver and cuBLAS.")
set(CPACK_COMPONENT_DOC_DISPLAY_NAME "Licences")
set(CPACK_COMPONENT_DOC_REQUIRED ON)
set(CPACK_COMPONENT_CLI_REQUIRED ON)

if(WIN32)
  set(CPACK_GENERATOR "NSIS;ZIP")
  include(${CMAKE_CURRENT_SOURCE_DIR}/nsis/nsis_settings.cmake)
else()
  set(CPACK_GENERATOR "DEB;TGZ")
endif()

# ---- Debian ------------------------------------------------------------------------------
# One .deb with every component (the monolithic default: CPACK_DEB_COMPONENT_INSTALL off).
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION "utils")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
# Library dependencies are computed by dpkg-shlibdeps from the binaries. It cannot see what
# Qt loads at run time: the platform plugins and the QML modules the UI imports
# (scripts/package-test.sh checks this list against ui/*.qml; QtCharts is for the monitor and
# cost views being written in other branches), and shared-mime-info
# processes share/mime/packages.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "qt6-qpa-plugins, qml6-module-qtquick, qml6-module-qtquick-controls, qml6-module-qtquick-layouts, \
qml6-module-qtquick-window, qml6-module-qtquick-templates, qml6-module-qtqml-workerscript, \
qml6-module-qtqml, qml6-module-qtcharts, qml6-module-qtquick-dialogs, shared-mime-info")
# The CUDA module links NVIDIA's cuBLAS, which is not a Debian 12 package (Debian's own is an
# older major version): dpkg-shlibdeps is shown where it is and told to ignore that no package
# owns it. Without cuBLAS Ember runs on the CPU and says why.
if(EMBER_BUILD_CUDA)
  get_directory_property(_cuda_libdir DIRECTORY ${PROJECT_SOURCE_DIR}/kernels/cuda
                         DEFINITION CUDAToolkit_LIBRARY_DIR)
  get_directory_property(_cuda_ver DIRECTORY ${PROJECT_SOURCE_DIR}/kernels/cuda
                         DEFINITION CUDAToolkit_VERSION_MAJOR)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "${_cuda_libdir}")
  set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libcublas-${_cuda_ver}-0")  # NVIDIA's CUDA repository
endif()

configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cpack_options.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/cpack_options.cmake
               @ONLY)
set(CPACK_PROJECT_CONFIG_FILE ${CMAKE_CURRENT_BINARY_DIR}/cpack_options.cmake)
include(CPack)
