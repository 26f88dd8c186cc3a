# FindUCX: the UCP library of Unified Communication X.
# Defines UCX_FOUND, UCX_VERSION and the imported target UCX::ucp
# (which brings uct and ucs along).
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_UCX QUIET ucx)
endif()

find_path(UCX_INCLUDE_DIR ucp/api/ucp.h HINTS ${PC_UCX_INCLUDE_DIRS})
find_library(UCX_UCP_LIBRARY ucp HINTS ${PC_UCX_LIBRARY_DIRS})
find_library(UCX_UCT_LIBRARY uct HINTS ${PC_UCX_LIBRARY_DIRS})
find_library(UCX_UCS_LIBRARY ucs HINTS ${PC_UCX_LIBRARY_DIRS})

if(UCX_INCLUDE_DIR AND EXISTS "${UCX_INCLUDE_DIR}/ucp/api/ucp_version.h")
  file(STRINGS "${UCX_INCLUDE_DIR}/ucp/api/ucp_version.h" _ucx_major
       REGEX "#define UCP_API_MAJOR +[0-9]+")
  file(STRINGS "${UCX_INCLUDE_DIR}/ucp/api/ucp_version.h" _ucx_minor
       REGEX "#define UCP_API_MINOR +[0-9]+")
  string(REGEX MATCH "[0-9]+$" _ucx_major "${_ucx_major}")
  string(REGEX MATCH "[0-9]+$" _ucx_minor "${_ucx_minor}")
  set(UCX_VERSION "${_ucx_major}.${_ucx_minor}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(UCX
  REQUIRED_VARS UCX_UCP_LIBRARY UCX_UCT_LIBRARY UCX_UCS_LIBRARY UCX_INCLUDE_DIR
  VERSION_VAR UCX_VERSION)

if(UCX_FOUND AND NOT TARGET UCX::ucp)
  add_library(UCX::ucs UNKNOWN IMPORTED)
  set_target_properties(UCX::ucs PROPERTIES IMPORTED_LOCATION "${UCX_UCS_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${UCX_INCLUDE_DIR}")
  add_library(UCX::uct UNKNOWN IMPORTED)
  set_target_properties(UCX::uct PROPERTIES IMPORTED_LOCATION "${UCX_UCT_LIBRARY}"
                        INTERFACE_LINK_LIBRARIES UCX::ucs)
  add_library(UCX::ucp UNKNOWN IMPORTED)
  set_target_properties(UCX::ucp PROPERTIES IMPORTED_LOCATION "${UCX_UCP_LIBRARY}"
                        INTERFACE_LINK_LIBRARIES UCX::uct)
endif()
mark_as_advanced(UCX_INCLUDE_DIR UCX_UCP_LIBRARY UCX_UCT_LIBRARY UCX_UCS_LIBRARY)
