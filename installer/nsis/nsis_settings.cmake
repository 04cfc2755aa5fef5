# The Windows installer (NSIS through CPack), included by installer/cpack_settings.cmake when
# building on Windows. Not built on the Debian CI: it is kept here so that a Windows build of
# the same install() rules gives an installer with the same components and integration as
# the .deb (start-menu entry, the .gguf file type, "Open with Ember"). See README.md.
#   cmake -S . -B build/win -G "Visual Studio 17 2022" -DEMBER_BUILD_CUDA=ON
#   cmake --build build/win --config Release && cd build/win && cpack -G NSIS -C Release
set(CPACK_NSIS_PACKAGE_NAME "Ember")
set(CPACK_NSIS_DISPLAY_NAME "Ember ${PROJECT_VERSION}")
if(EXISTS "${PROJECT_SOURCE_DIR}/resources/icons/ember.ico")  # not made yet: README.md
  set(CPACK_NSIS_MUI_ICON "${PROJECT_SOURCE_DIR}/resources/icons/ember.ico")
  set(CPACK_NSIS_MUI_UNIICON "${PROJECT_SOURCE_DIR}/resources/icons/ember.ico")
endif()
set(CPACK_NSIS_INSTALLED_ICON_NAME "bin\\\\ember-app.exe")
set(CPACK_NSIS_ENABLE_UNINSTALL_BEFORE_INSTALL ON)
set(CPACK_NSIS_MODIFY_PATH ON)  # offers to put bin\ (the ember CLI) on PATH
set(CPACK_NSIS_EXECUTABLES_DIRECTORY "bin")
set(CPACK_PACKAGE_EXECUTABLES "ember-app;Ember")  # start-menu shortcut
set(CPACK_NSIS_MUI_FINISHPAGE_RUN "ember-app.exe")
set(CPACK_RESOURCE_FILE_LICENSE "${PROJECT_SOURCE_DIR}/resources/licenses/notices.txt")
# The .gguf file type: "Open with Ember" passes the file as the first argument, which
# ember-app opens through open_model_file() like on Linux. Removed again on uninstall.
set(CPACK_NSIS_EXTRA_INSTALL_COMMANDS [[
  WriteRegStr HKCR ".gguf" "" "Ember.GGUF"
  WriteRegStr HKCR ".gguf" "Content Type" "application/x-gguf"
  WriteRegStr HKCR "Ember.GGUF" "" "GGUF language model"
  WriteRegStr HKCR "Ember.GGUF\DefaultIcon" "" "$INSTDIR\bin\ember-app.exe,0"
  WriteRegStr HKCR "Ember.GGUF\shell\open\command" "" '"$INSTDIR\bin\ember-app.exe" "%1"'
]])
set(CPACK_NSIS_EXTRA_UNINSTALL_COMMANDS [[
  DeleteRegKey HKCR "Ember.GGUF"
  DeleteRegKey HKCR ".gguf"
]])
# Components (cpack_settings.cmake) become checkboxes: cli and doc are required, the CUDA
# backend is optional. Qt's DLLs and QML modules must be deployed next to ember-app.exe
# first (windeployqt), see README.md.
