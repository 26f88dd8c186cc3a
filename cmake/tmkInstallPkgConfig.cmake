# Runs at install time (install(SCRIPT)): writes tmk.pc with the prefix
# being installed to, so that `cmake --install build --prefix P` gives a
# tmk.pc that names P.  The rest of the file (TMK_PC_BODY) was configured
# from cmake/tmk.pc.in; TMK_PC_BODY, TMK_PC_STAGED and TMK_PC_DESTINATION
# are set by the install(CODE) before this script.  file(INSTALL) honours
# DESTDIR and records the file in install_manifest.txt.
file(READ "${TMK_PC_BODY}" body)
file(WRITE "${TMK_PC_STAGED}" "prefix=${CMAKE_INSTALL_PREFIX}\n${body}")
if(IS_ABSOLUTE "${TMK_PC_DESTINATION}")
  set(destination "${TMK_PC_DESTINATION}")
else()
  set(destination "${CMAKE_INSTALL_PREFIX}/${TMK_PC_DESTINATION}")
endif()
file(INSTALL DESTINATION "${destination}" TYPE FILE FILES "${TMK_PC_STAGED}")
