# tmkPackaging: helpers for the files that describe an installed tmk
# (tmk.pc, tmkcc, the static library's link interface).

# tmk_cxx_runtime_libraries(OUT): what linking with the C++ compiler adds to
# a C link (stdc++ and m with GCC), for C programs that link libtmk.a.
function(tmk_cxx_runtime_libraries out)
  set(libraries "")
  foreach(library IN LISTS CMAKE_CXX_IMPLICIT_LINK_LIBRARIES)
    if(NOT library IN_LIST CMAKE_C_IMPLICIT_LINK_LIBRARIES)
      list(APPEND libraries "${library}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES libraries)
  set(${out} "${libraries}" PARENT_SCOPE)
endfunction()

# tmk_pkg_config_libs(OUT LIBRARY...): the Libs.private of tmk.pc for a
# static link: each library file as -L<dir> -l<name> (no -L for the
# compiler's own directories), then threads and the C++ library that C
# programs do not link by themselves.
function(tmk_pkg_config_libs out)
  set(flags "")
  set(implicit_dirs ${CMAKE_C_IMPLICIT_LINK_DIRECTORIES})
  foreach(library IN LISTS ARGN)
    if(library MATCHES "^-")
      list(APPEND flags "${library}")
      continue()
    endif()
    get_filename_component(directory "${library}" DIRECTORY)
    get_filename_component(name "${library}" NAME_WE)
    string(REGEX REPLACE "^lib" "" name "${name}")
    if(directory AND NOT directory IN_LIST implicit_dirs)
      list(APPEND flags "-L${directory}")
    endif()
    list(APPEND flags "-l${name}")
  endforeach()
  list(APPEND flags "-pthread")
  tmk_cxx_runtime_libraries(cxx_libraries)
  foreach(library IN LISTS cxx_libraries)
    list(APPEND flags "-l${library}")
  endforeach()
  list(REMOVE_DUPLICATES flags)
  list(JOIN flags " " flags)
  set(${out} "${flags}" PARENT_SCOPE)
endfunction()

# tmk_install_path(OUT DIR): DIR as a path below ${prefix} for tmk.pc, or
# unchanged when absolute.
function(tmk_install_path out dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${dir}" PARENT_SCOPE)
  else()
    set(${out} "\${prefix}/${dir}" PARENT_SCOPE)
  endif()
endfunction()

# tmk_relative_to_bindir(OUT DIR): DIR (an install directory, relative to
# the prefix or absolute) as tmkcc finds it: relative to the directory tmkcc
# is installed in, or absolute.
function(tmk_relative_to_bindir out dir)
  if(IS_ABSOLUTE "${dir}" OR IS_ABSOLUTE "${CMAKE_INSTALL_BINDIR}")
    get_filename_component(absolute "${dir}" ABSOLUTE BASE_DIR "${CMAKE_INSTALL_PREFIX}")
    set(${out} "${absolute}" PARENT_SCOPE)
  else()
    file(RELATIVE_PATH relative "/prefix/${CMAKE_INSTALL_BINDIR}" "/prefix/${dir}")
    set(${out} "\$bindir/${relative}" PARENT_SCOPE)
  endif()
endfunction()
